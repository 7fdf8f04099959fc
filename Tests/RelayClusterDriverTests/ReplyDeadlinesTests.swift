import RelayClusterDriver
import Testing

/// Redis's liveness on one connection (ReplyDeadlines.swift).
@Suite struct ReplyDeadlinesTests {
  /// One check (`#expect` takes no mutating call).
  private func lost(_ d: inout ReplyDeadlines, _ nowMs: UInt64, stall: UInt64) -> Bool {
    d.check(nowMs: nowMs, stallMs: stall)
  }

  /// A deep pipeline whose replies keep coming is never lost; silence from one check
  /// to the next past the limit is.
  @Test func countedFromTheLastAnswer() {
    var d = ReplyDeadlines()
    for _ in 0..<3 { d.sent(nowMs: 0, limitMs: 100) }
    #expect(!lost(&d, 50, stall: 1_000))
    d.answered(nowMs: 90)
    #expect(!lost(&d, 150, stall: 1_000))  // answered since the last check
    d.answered(nowMs: 180)
    #expect(!lost(&d, 250, stall: 1_000))  // a new silence: nothing confirmed yet
    #expect(!lost(&d, 282, stall: 1_000))  // confirmed up to the check at 250, within the limit
    #expect(lost(&d, 300, stall: 1_000))  // confirmed up to 282: past the limit
    d.answered(nowMs: 310)
    #expect(d.silentSinceMs == nil && !lost(&d, 10_000, stall: 1) && !d.stalled)
  }

  /// After a loop turn longer than the limit, the first check finds the request
  /// overdue by the clock, but the reply may be waiting unread (timers run before the
  /// poll): not lost. Read in the poll, the reply clears it; unread, the next check
  /// declares the connection lost.
  @Test func aLongTurnIsNotSilence() {
    var d = ReplyDeadlines()
    #expect(!lost(&d, 0, stall: 50))
    d.sent(nowMs: 10, limitMs: 100)
    #expect(!lost(&d, 5_000, stall: 50) && !d.stalled)  // the stalled turn ended
    d.answered(nowMs: 5_000)  // the poll right after it read the reply
    #expect(!lost(&d, 5_100, stall: 50))

    var silent = ReplyDeadlines()
    silent.sent(nowMs: 10, limitMs: 100)
    #expect(!lost(&silent, 5_000, stall: 50))
    #expect(lost(&silent, 5_100, stall: 50) && silent.stalled)
  }

  /// `stalled` (the node's readiness) follows the same confirmed silence, and an
  /// answer clears it at once.
  @Test func stalledIsConfirmedSilence() {
    var d = ReplyDeadlines()
    d.sent(nowMs: 0, limitMs: 10_000)
    #expect(!lost(&d, 600, stall: 1_000) && !d.stalled)
    #expect(!lost(&d, 1_200, stall: 1_000) && !d.stalled)  // 600 confirmed
    #expect(!lost(&d, 1_800, stall: 1_000) && d.stalled)  // 1 200 confirmed
    d.sent(nowMs: 1_900, limitMs: 10_000)
    d.answered(nowMs: 1_900)
    #expect(!d.stalled)
  }
}
