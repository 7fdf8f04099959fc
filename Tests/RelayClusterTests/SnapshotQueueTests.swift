import RelayCluster
import Testing

/// When snapshots are made (SnapshotQueue.swift).
@Suite struct SnapshotQueueTests {
  @Test func oneAtATimeTheNewestWaitAndOlderOnesAreSuperseded() {
    var q = SnapshotQueue<Int>(waitingMax: 2)
    #expect(q.due(1).make == 1 && q.busy)
    #expect(q.due(2).make == nil)
    #expect(q.due(3).make == nil)
    let fourth = q.due(4)
    #expect(fourth.make == nil && fourth.drop == [2] && q.superseded == 1)
    #expect(q.finished() == 3 && q.busy)  // the oldest waiting one goes next
    #expect(q.finished() == 4 && q.busy)
    #expect(q.finished() == nil && !q.busy)
    #expect(q.due(5).make == 5)
  }

  /// A burst ends with its last due positions made, however long it was.
  @Test func aBurstEndsWithItsNewestMade() {
    var q = SnapshotQueue<Int>(waitingMax: 1)
    var made = [q.due(0).make!]
    var dropped: [Int] = []
    for p in 1...100 { dropped += q.due(p).drop }
    while let next = q.finished() { made.append(next) }
    #expect(made == [0, 100] && dropped == Array(1...99) && q.superseded == 99)
  }

  @Test func abandonedWaitingOnesAreReturnedNotCounted() {
    var q = SnapshotQueue<Int>()
    _ = q.due(1)
    _ = q.due(2)
    _ = q.due(3)
    #expect(q.abandon() == [2, 3] && !q.busy && q.superseded == 0)
    #expect(q.due(4).make == 4)
    _ = q.due(5)
    #expect(q.dropWaiting() == [5] && q.busy && q.finished() == nil && !q.busy)
  }
}
