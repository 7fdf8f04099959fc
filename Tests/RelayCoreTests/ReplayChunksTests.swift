// ReplayChunks (ReplayChunks.swift): the replay log's storage behaves as a FIFO of
// events, and a copy taken at any point (a snapshot's capture) keeps exactly the
// events it had while the original goes on.
import RelayPrimitives
import Testing

@testable import RelayCore

@Suite struct ReplayChunksTests {
  static func event(_ n: Int64, _ payload: Payload = Payload([])) -> RecordedEvent {
    RecordedEvent(atMonoMs: n, body: .payload(payload))
  }

  /// Count, first, every index and the in-place walk agree with `model`.
  static func check(_ chunks: ReplayChunks, _ model: [Int64], _ what: String) {
    #expect(chunks.count == model.count, "\(what): count")
    #expect(chunks.isEmpty == model.isEmpty, "\(what): isEmpty")
    #expect(chunks.first?.atMonoMs == model.first, "\(what): first")
    #expect((0..<chunks.count).map { chunks[$0].atMonoMs } == model, "\(what): by index")
    var walked: [Int64] = []
    chunks.forEach { walked.append($0.atMonoMs) }
    #expect(walked == model, "\(what): walk")
  }

  /// Random appends, drops and clears against an array; copies taken along the way
  /// (across chunk boundaries, with the front inside a chunk, empty) are checked at
  /// the end, after everything the original did since.
  @Test func copiesKeepTheirEventsWhileTheOriginalGoesOn() {
    var rng = SeededRandom(seed: 7)
    var chunks = ReplayChunks()
    var model: [Int64] = []
    var next: Int64 = 1
    var copies: [(copy: ReplayChunks, model: [Int64], step: Int)] = []
    for step in 0..<6_000 {
      // Growing and shrinking phases, so copies see both long and short logs.
      let appending = (step / 700) % 2 == 0 ? 70 : 35
      switch rng.below(100) {
      case 0..<appending:
        chunks.append(Self.event(next))
        model.append(next)
        next += 1
      case appending..<99:
        guard !model.isEmpty else { break }
        chunks.dropFirst()
        model.removeFirst()
      default:
        chunks.removeAll()
        model = []
      }
      if rng.chance(3) { copies.append((chunks, model, step)) }
      if step % 50 == 0 { Self.check(chunks, model, "step \(step)") }
    }
    Self.check(chunks, model, "end")
    #expect(copies.count > 100)
    #expect(copies.contains { $0.model.count > 3 * ReplayChunks.chunkSize }, "no copy spans several chunks")
    for c in copies { Self.check(c.copy, c.model, "copy at step \(c.step)") }
  }

  /// A dropped event's payload is freed when it is dropped, not when its chunk goes;
  /// while a copy holds it, the copy keeps it intact.
  @Test func aDroppedPayloadIsFreedAtOnceUnlessACopyHoldsIt() {
    var chunks = ReplayChunks()
    weak var first: Payload?
    do {
      let payload = Payload(Array(repeating: 1, count: 100))
      first = payload
      chunks.append(Self.event(1, payload))
    }
    for n in Int64(2)...5 { chunks.append(Self.event(n)) }
    var copy: ReplayChunks? = chunks
    chunks.dropFirst()
    #expect(first != nil, "the copy's event lost its payload")
    if case .payload(let p)? = copy?.first?.body { #expect(p.bytes.count == 100) }
    copy = nil
    #expect(first == nil, "the log kept a dropped payload after the copy went")
    var alone = ReplayChunks()
    do {
      let payload = Payload([2, 2])
      first = payload
      alone.append(Self.event(1, payload))
    }
    alone.append(Self.event(2))
    alone.dropFirst()
    #expect(first == nil, "a dropped payload stayed alive with its chunk")
    #expect(alone.count == 1 && chunks.count == 4)
  }
}
