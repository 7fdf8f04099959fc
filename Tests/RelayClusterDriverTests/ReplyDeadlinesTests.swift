import RelayClusterDriver
import Testing

/// Redis's liveness on one connection (ReplyDeadlines.swift).
@Suite struct ReplyDeadlinesTests {
  /// A deep pipeline whose replies keep coming is never overdue; silence is.
  @Test func countedFromTheLastAnswer() {
    var d = ReplyDeadlines()
    for _ in 0..<3 { d.sent(nowMs: 0, limitMs: 100) }
    d.answered(nowMs: 90)
    #expect(!d.overdue(nowMs: 150))  // 60 ms since the last answer
    d.answered(nowMs: 180)
    #expect(!d.overdue(nowMs: 280) && d.overdue(nowMs: 281))
    #expect(d.responsive(nowMs: 200, stallMs: 50) && !d.responsive(nowMs: 230, stallMs: 50))
    d.answered(nowMs: 300)
    #expect(d.silentSinceMs == nil && !d.overdue(nowMs: 10_000))
  }
}
