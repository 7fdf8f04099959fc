import RelayPrimitives
import Testing

struct DeadlineTimerTests {
  @Test func armedOncePerDeadline() {
    var t = DeadlineTimer()
    #expect(t.arm(dueMs: 5_000, nowMs: 4_200) == .start(afterMs: 800))
    #expect(t.arm(dueMs: 5_000, nowMs: 4_900) == .keep)
    #expect(t.arm(dueMs: 4_500, nowMs: 4_300) == .start(afterMs: 200), "an earlier deadline re-arms")
    #expect(t.arm(dueMs: nil, nowMs: 4_300) == .stop)
    #expect(t.arm(dueMs: nil, nowMs: 4_400) == .keep)
  }

  @Test func neverZeroNeverBeyondTheHour() {
    var t = DeadlineTimer()
    #expect(t.arm(dueMs: 1_000, nowMs: 9_000) == .start(afterMs: 1), "overdue: the next turn, not this timers pass")
    #expect(t.arm(dueMs: 10_000_000, nowMs: 0) == .start(afterMs: UInt64(DeadlineTimer.longestMs)))
  }

  @Test func firedOrDisarmedArmsAgainForTheSameDeadline() {
    var t = DeadlineTimer()
    _ = t.arm(dueMs: 5_000, nowMs: 0)
    t.fired()
    #expect(t.armedMs == nil)
    #expect(t.arm(dueMs: 5_000, nowMs: 5_000) == .start(afterMs: 1), "a deadline the tick left due fires again")
    #expect(t.disarm() == .stop)
    #expect(t.arm(dueMs: 5_000, nowMs: 4_000) == .start(afterMs: 1_000))
  }
}
