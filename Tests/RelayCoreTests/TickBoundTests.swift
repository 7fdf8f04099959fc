// RelayCore.tick fires a bounded count of deadlines per call; the rest stay due and
// `nextDeadline` says so, so the shell calls again on its next turn (protocol/ §16).
import Testing

@testable import RelayCore

@Suite struct TickBoundTests {
  @Test func aMassExpiryIsSpreadOverTicks() {
    let h = Harness { config in
      withoutHeartbeats(&config)
      config.maxDeadlinesPerTick = 2
    }
    for n in 1...5 { h.open(UInt64(n)) }  // five hello deadlines due together
    h.now.monoMs += 10_000
    var closedPerTick: [Int] = []
    while let next = h.core.nextDeadline, next <= h.now.monoMs {
      h.core.tick(at: h.now)
      closedPerTick.append(h.out().filter { $0.hasPrefix("close") && $0.contains("4501") }.count)
    }
    #expect(closedPerTick == [2, 2, 1])
  }

  /// The delivery bound: a tick stops once the events it caused reached the limit.
  @Test func recipientsBoundATick() {
    let h = Harness { config in
      config.maxTickDeliveries = 3
      config.heartbeatIntervalMs = 0
      config.heartbeatTimeoutMs = 1_000
    }
    for n in 1...4 { h.join(UInt64(n), uid: "u\(n)") }
    _ = h.out()
    h.now.monoMs += 5_000  // all four are silent past the heartbeat timeout
    h.core.tick(at: h.now)
    let first = h.out().filter { $0.hasPrefix("drop") }.count
    #expect(first == 1)  // the first death's participant.lost reached 3 recipients
    #expect(h.core.nextDeadline.map { $0 <= h.now.monoMs } == true)
    while let next = h.core.nextDeadline, next <= h.now.monoMs { h.core.tick(at: h.now) }
    #expect(first + h.out().filter { $0.hasPrefix("drop") }.count == 4)
  }
}
