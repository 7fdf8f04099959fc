// The invariants the core checks at its state machines' boundaries, in release builds
// too (DESIGN.md, "Limits and failures"). A broken one traps, which a test process
// cannot survive, so each check is a pure function returning the broken invariant's
// name; the trap site calls it, and these tests call it directly.
import Testing

@testable import RelayCore

@Suite struct InvariantTests {
  @Test func deadlineHeapPopsInOrder() {
    let early: (atMonoMs: Int64, order: UInt64) = (100, 1)
    let tie: (atMonoMs: Int64, order: UInt64) = (100, 2)
    let late: (atMonoMs: Int64, order: UInt64) = (200, 0)
    #expect(DeadlineQueue.violation(popped: early, next: early) == nil)
    #expect(DeadlineQueue.violation(popped: early, next: tie) == nil)
    #expect(DeadlineQueue.violation(popped: early, next: late) == nil)
    #expect(DeadlineQueue.violation(popped: tie, next: early)?.hasPrefix("deadline order") == true)
    #expect(DeadlineQueue.violation(popped: late, next: tie)?.hasPrefix("deadline order") == true)
  }

  /// The queue itself keeps the order through many interleaved pushes and pops.
  @Test func deadlineQueueNeverTrapsOnItsOwnOrder() {
    var q = DeadlineQueue()
    var popped: [Deadline] = []
    for i in 0..<2_000 {
      q.schedule(at: Int64((i * 7_919) % 1_000), .hello(ConnectionID(UInt64(i))))
      if i % 3 == 0, let d = q.popFirst() { popped.append(d) }
    }
    while let d = q.popFirst() { popped.append(d) }
    #expect(popped.count == 2_000)
  }

  @Test func replayLogBounds() {
    #expect(ReplayLog.violation(count: 10, bytes: 500, maxEvents: 10, maxBytes: 500) == nil)
    #expect(ReplayLog.violation(count: 0, bytes: 0, maxEvents: 10, maxBytes: 0) == nil)
    #expect(ReplayLog.violation(count: 11, bytes: 0, maxEvents: 10, maxBytes: 0)?.hasPrefix("replay log bound") == true)
    #expect(ReplayLog.violation(count: 1, bytes: 501, maxEvents: 10, maxBytes: 500)?.hasPrefix("replay log bound") == true)
    #expect(ReplayLog.violation(count: 0, bytes: 32, maxEvents: 10, maxBytes: 0)?.hasPrefix("replay log accounting") == true)
  }

  @Test func replayBudgetBoundsAndAccounting() {
    #expect(ReplayBudget.violation(bytes: 100, liveEvents: 2) == nil)
    #expect(ReplayBudget.violation(bytes: 0, liveEvents: 0) == nil)
    #expect(ReplayBudget.violation(bytes: -1, liveEvents: 1)?.hasPrefix("replay budget accounting") == true)
    #expect(ReplayBudget.violation(bytes: 40, liveEvents: 0)?.hasPrefix("replay budget accounting") == true)
    #expect(ReplayBudget.violation(bytes: 900, maxBytes: 1_000, recordsLeft: 5) == nil)
    #expect(ReplayBudget.violation(bytes: 1_100, maxBytes: 1_000, recordsLeft: 0) == nil)  // nothing left to evict
    #expect(ReplayBudget.violation(bytes: 1_100, maxBytes: 0, recordsLeft: 5) == nil)  // unbounded
    #expect(ReplayBudget.violation(bytes: 1_100, maxBytes: 1_000, recordsLeft: 5)?.hasPrefix("replay budget bound") == true)
  }

  @Test func handQueueUniquenessAndOrder() {
    let queue = [Hand(uid: "a", name: "A", raisedAtWallMs: 10), Hand(uid: "b", name: "B", raisedAtWallMs: 20)]
    let c = Hand(uid: "c", name: "C", raisedAtWallMs: 20)
    #expect(Hand.violation(appending: c, anywhereIn: queue) == nil)
    #expect(Hand.violation(appending: c, after: queue.last) == nil)
    #expect(Hand.violation(appending: c, after: nil) == nil)
    let againB = Hand(uid: "b", name: "B", raisedAtWallMs: 30)
    #expect(Hand.violation(appending: againB, after: queue.last)?.hasPrefix("hand queue uniqueness") == true)
    let againA = Hand(uid: "a", name: "A", raisedAtWallMs: 30)
    #expect(Hand.violation(appending: againA, after: queue.last) == nil)  // only the scan sees it
    #expect(Hand.violation(appending: againA, anywhereIn: queue)?.hasPrefix("hand queue uniqueness") == true)
    let early = Hand(uid: "d", name: "D", raisedAtWallMs: 5)
    #expect(Hand.violation(appending: early, after: queue.last)?.hasPrefix("hand queue order") == true)
  }
}
