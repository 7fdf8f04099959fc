// RateWindow under a stall (Instant.lateMs): a backlog bunched by the relay's own
// stall is counted as the client sent it; a burst beyond what the stall delayed is not.
import Testing

@testable import RelayCore

@Suite struct RateWindowStallTests {
  /// 10 per second for 1 s, a 3 s stall, then the 30 messages of the stall at once:
  /// with a limit of 20 per 1 000 ms, all are accepted when the stall is known.
  @Test func backlogOfAStallIsCountedAsSent() {
    var window = RateWindow()
    var granted = 0
    for k in 0..<10 where window.tryAcquire(at: Int64(k * 100), limit: 20, windowMs: 1_000) { granted += 1 }
    for _ in 0..<30 where window.tryAcquire(at: 4_000, lateMs: 3_000, limit: 20, windowMs: 1_000) { granted += 1 }
    for k in 1...10 where window.tryAcquire(at: 4_000 + Int64(k * 100), limit: 20, windowMs: 1_000) { granted += 1 }
    #expect(granted == 50)
  }

  /// Without the stall's credit the same backlog is refused past the limit.
  @Test func withoutCreditTheBacklogIsLimited() {
    var window = RateWindow()
    var granted = 0
    for _ in 0..<30 where window.tryAcquire(at: 4_000, limit: 20, windowMs: 1_000) { granted += 1 }
    #expect(granted == 20)
  }

  /// A stall allows at most what it delayed: 3 s at 20 per second, counted 50 ms apart
  /// from 7 000 to 10 000 (61 instants), never 20 within any 1 000 ms.
  @Test func creditIsBoundedByTheStall() {
    var window = RateWindow()
    var granted = 0
    for _ in 0..<200 where window.tryAcquire(at: 10_000, lateMs: 3_000, limit: 20, windowMs: 1_000) { granted += 1 }
    #expect(granted == 61)
  }
}
