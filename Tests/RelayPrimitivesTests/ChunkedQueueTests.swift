// ChunkedQueue (ChunkedQueue.swift): a FIFO whose copy taken at any point (a
// snapshot's capture) keeps exactly the elements it had while the original goes on.
import RelayPrimitives
import Testing

@Suite struct ChunkedQueueTests {
  /// Count, first, every index and the in-place walk agree with `model`.
  static func check(_ q: ChunkedQueue<Int>, _ model: [Int], _ what: String) {
    #expect(q.count == model.count, "\(what): count")
    #expect(q.isEmpty == model.isEmpty, "\(what): isEmpty")
    #expect(q.first == model.first, "\(what): first")
    #expect((0..<q.count).map { q[$0] } == model, "\(what): by index")
    var walked: [Int] = []
    q.forEach { walked.append($0) }
    #expect(walked == model, "\(what): walk")
  }

  @Test func popsInAppendOrderAcrossChunks() {
    var q = ChunkedQueue<Int>(chunkSize: 4)
    #expect(q.popFirst() == nil && q.first == nil && q.isEmpty)
    for i in 0..<10 { q.append(i) }
    Self.check(q, Array(0..<10), "filled")
    #expect((0..<5).map { _ in q.popFirst()! } == [0, 1, 2, 3, 4])
    Self.check(q, Array(5..<10), "popped into the second chunk")
    for i in 10..<13 { q.append(i) }
    #expect((0..<8).map { _ in q.popFirst()! } == Array(5..<13))
    #expect(q.popFirst() == nil && q.isEmpty)
    q.append(13)
    Self.check(q, [13], "refilled")
    Self.check(ChunkedQueue(chunkSize: 3, 0..<8), Array(0..<8), "from a sequence")
  }

  /// Random appends, pops and clears against an array, for several chunk sizes;
  /// copies taken along the way (across chunk boundaries, with the front inside a
  /// chunk, empty) are checked at the end, after everything the original did since.
  @Test(arguments: [1, 4, 32])
  func copiesKeepTheirElementsWhileTheOriginalGoesOn(chunkSize: Int) {
    var rng = SeededRandom(seed: UInt64(chunkSize))
    var q = ChunkedQueue<Int>(chunkSize: chunkSize)
    var model: [Int] = []
    var next = 1
    var copies: [(copy: ChunkedQueue<Int>, model: [Int], step: Int)] = []
    for step in 0..<6_000 {
      // Growing and shrinking phases, so copies see both long and short queues.
      let appending = (step / 700) % 2 == 0 ? 70 : 35
      switch rng.below(100) {
      case 0..<appending:
        q.append(next)
        model.append(next)
        next += 1
      case appending..<99:
        #expect(q.popFirst() == model.first, "step \(step): popped")
        if !model.isEmpty { model.removeFirst() }
      default:
        q.removeAll()
        model = []
      }
      if rng.chance(3) { copies.append((q, model, step)) }
      if step % 50 == 0 { Self.check(q, model, "step \(step)") }
    }
    Self.check(q, model, "end")
    #expect(copies.count > 100)
    #expect(copies.contains { $0.model.count > 3 * chunkSize }, "no copy spans several chunks")
    for c in copies { Self.check(c.copy, c.model, "copy at step \(c.step)") }
  }

  final class Box {}

  /// A popped element left a filler is freed at once, not when its chunk goes; a copy
  /// holding it keeps it.
  @Test func aFillerFreesThePoppedElementUnlessACopyHoldsIt() {
    for chunkSize in [4, 64] {  // the first chunk full, and only the partial tail
      var q = ChunkedQueue<Box>(chunkSize: chunkSize)
      let filler = Box()
      weak var first: Box?
      do {
        let box = Box()
        first = box
        q.append(box)
      }
      for _ in 0..<5 { q.append(Box()) }
      var copy: ChunkedQueue<Box>? = q
      q.popFirst(leaving: filler)
      #expect(first != nil && copy?.first === first, "the copy lost its element")
      copy = nil
      #expect(first == nil, "a popped element stayed alive with its chunk (\(chunkSize))")
      #expect(q.count == 5)
    }
  }
}
