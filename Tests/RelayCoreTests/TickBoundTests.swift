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
      withoutHeartbeats(&config)
      config.maxTickDeliveries = 3
      config.graceMs = 1_000
    }
    for n in 1...7 { h.join(UInt64(n), uid: "u\(n)") }
    for n in 1...4 { h.closed(UInt64(n), clean: false) }  // four lost at once
    _ = h.out()
    h.now.monoMs += 5_000  // all four graces are over
    h.core.tick(at: h.now)
    let timedOut = { (lines: [String]) in lines.filter { $0.contains(#""type":"participant.timed_out""#) }.count }
    let first = timedOut(h.out())
    #expect(first == 1)  // the first one's participant.timed_out reached 3 recipients
    #expect(h.core.nextDeadline.map { $0 <= h.now.monoMs } == true)
    while let next = h.core.nextDeadline, next <= h.now.monoMs { h.core.tick(at: h.now) }
    #expect(first + timedOut(h.out()) == 4)
  }
}
