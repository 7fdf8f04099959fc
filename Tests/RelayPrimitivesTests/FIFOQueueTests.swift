import RelayPrimitives
import Testing

@Suite struct FIFOQueueTests {
  @Test func popsInAppendOrder() {
    var q = FIFOQueue<Int>()
    #expect(q.popFirst() == nil && q.first == nil && q.last == nil)
    for i in 0..<10 { q.append(i) }
    #expect(q.count == 10 && q.first == 0 && q.last == 9)
    #expect((0..<4).map { _ in q.popFirst()! } == [0, 1, 2, 3])
    #expect(Array(q.elements) == [4, 5, 6, 7, 8, 9])
    #expect(q[0] == 4 && q[5] == 9)
  }

  /// The one rule: the dead prefix goes once it is at least the threshold and at
  /// least half of the storage; never earlier, and the order survives.
  @Test func compactsWhenHalfUsedAndPastTheThreshold() {
    let threshold = FIFOQueue<Int>.compactionThreshold
    var q = FIFOQueue<Int>()
    for i in 0..<(4 * threshold) { q.append(i) }
    for _ in 0..<(threshold - 1) { q.popFirst() }
    #expect(q.deadPrefix == threshold - 1)  // below the threshold: kept
    for _ in 0..<threshold { q.popFirst() }
    #expect(q.deadPrefix == 2 * threshold - 1)  // past the threshold, but under half
    q.popFirst()
    #expect(q.deadPrefix == 0)  // half: compacted
    #expect(q.first == 2 * threshold && q.count == 2 * threshold)
    var expected = 2 * threshold
    while let x = q.popFirst() {
      #expect(x == expected)
      expected += 1
    }
    #expect(expected == 4 * threshold)
  }

  @Test func drainingEmptiesTheStorage() {
    var q = FIFOQueue<Int>()
    for i in 0..<10 { q.append(i) }
    while q.popFirst() != nil {}
    #expect(q.isEmpty && q.deadPrefix == 0)
  }

  /// After a burst the capacity goes back once the queue is a quarter full, down to
  /// what `retainedCapacity` allows.
  @Test func givesCapacityBackAfterABurst() {
    var q = FIFOQueue<Int>()
    for i in 0..<100_000 { q.append(i) }
    while q.count > 10 { q.popFirst() }
    #expect(q.storageCapacity < 1_000)
    var bytes = FIFOQueue<UInt8>(retainedCapacity: 1 << 20)
    bytes.append(contentsOf: [UInt8](repeating: 7, count: 100_000))
    bytes.removeFirst(100_000)
    #expect(bytes.storageCapacity >= 100_000)  // within what it may retain
  }

  @Test func modifiesAndInsertsInPlace() {
    var q = FIFOQueue<[Int]>()
    q.append([1])
    q.append([3])
    q[0].append(2)
    q.insert([9], at: 1)
    #expect(Array(q.elements) == [[1, 2], [9], [3]])
    q.removeFirst(2)
    #expect(Array(q.elements) == [[3]])
  }
}
