import RelayPrimitives
import Testing

@Suite struct DeadlineLaneTests {
  @Test func popsOnlyWhatIsDueInArrivalOrder() {
    var q = DeadlineLane<UInt64>()
    q.add(1, dueMs: 100)
    q.add(2, dueMs: 150)
    q.add(3, dueMs: 200)
    #expect(q.popDue(nowMs: 99).isEmpty)
    #expect(q.popDue(nowMs: 150) == [1, 2])
    #expect(q.nextDueMs == 200)
    #expect(q.popDue(nowMs: 1_000) == [3])
    #expect(q.nextDueMs == nil)
  }

  @Test func compactionKeepsOrder() {
    var q = DeadlineLane<UInt64>()
    for i in 0..<5_000 { q.add(UInt64(i), dueMs: Int64(i)) }
    #expect(q.popDue(nowMs: 2_999).count == 3_000)
    q.add(9_999, dueMs: 9_999)
    #expect(q.popDue(nowMs: 4_999) == (3_000..<5_000).map(UInt64.init))
    #expect(q.popDue(nowMs: 10_000) == [9_999])
  }

  /// Equal deadlines keep their arrival order; an earlier one is refused.
  @Test func acceptsOnlyNonDecreasingDeadlines() {
    var q = DeadlineLane<String>()
    q.add("a", dueMs: 10)
    q.add("b", dueMs: 10)
    #expect(q.accepts(10) && q.accepts(11) && !q.accepts(9))
    #expect(q.popFirst()?.value == "a")
    #expect(q.pending.map(\.value) == ["b"])
  }

  /// The invariant `add` traps on, by name (DESIGN.md: bugs trap with a message).
  @Test func namesTheOrderInvariant() {
    #expect(DeadlineLane<Int>.violation(adding: 5, after: nil) == nil)
    #expect(DeadlineLane<Int>.violation(adding: 5, after: 5) == nil)
    let broken = DeadlineLane<Int>.violation(adding: 4, after: 5)
    #expect(broken?.hasPrefix("deadline lane order") == true)
  }
}
