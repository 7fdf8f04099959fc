// protocol/ §5 heartbeats as the shell's pure machine: pings every interval, a silent
// connection timed out after the timeout (at most a quantum late), inbound frames
// defer it at the cost of a store, closed connections forgotten, checks batched.
import RelayPrimitives
import Testing

/// What the machine asked for, with the time of the `due` call that asked.
struct HeartbeatLog {
  var pings: [(id: UInt64, atMs: Int64)] = []
  var timeouts: [(id: UInt64, atMs: Int64)] = []
  var calls = 0

  func pings(of id: UInt64) -> [Int64] { pings.filter { $0.id == id }.map(\.atMs) }
  func timeouts(of id: UInt64) -> [Int64] { timeouts.filter { $0.id == id }.map(\.atMs) }
}

extension Heartbeats {
  /// Calls `due` at every `nextDeadlineMs` up to `endMs`, as the shell's one timer
  /// does; `answering` connections answer each ping at once (a pong is an inbound
  /// frame).
  mutating func run(until endMs: Int64, answering: [UInt64: Slot] = [:], log: inout HeartbeatLog) {
    while let next = nextDeadlineMs, next <= endMs {
      let due = due(nowMs: next)
      log.calls += 1
      for id in due.ping {
        log.pings.append((id, next))
        if let slot = answering[id] { inbound(slot, nowMs: next) }
      }
      for id in due.timedOut { log.timeouts.append((id, next)) }
    }
  }
}

@Suite struct HeartbeatsTests {
  @Test func quantumIsATenthOfTheShorterSettingAtMostOneSecond() {
    #expect(Heartbeats.quantum(intervalMs: 10_000, timeoutMs: 15_000) == 1_000)
    #expect(Heartbeats.quantum(intervalMs: 1_000, timeoutMs: 3_000) == 100)
    #expect(Heartbeats.quantum(intervalMs: 0, timeoutMs: 3_000) == 300)
    #expect(Heartbeats.quantum(intervalMs: 5, timeoutMs: 0) == 1)
    #expect(Heartbeats.quantum(intervalMs: 0, timeoutMs: 0) == 1)
  }

  @Test func pingsEveryIntervalWhileAnswered() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    let slot = hb.opened(7, nowMs: 1_000)
    var log = HeartbeatLog()
    hb.run(until: 11_000, answering: [7: slot], log: &log)
    #expect(log.pings(of: 7) == (2...11).map { Int64($0) * 1_000 })
    #expect(log.timeouts.isEmpty)
  }

  @Test func silentConnectionIsPingedThenTimedOutOnce() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    _ = hb.opened(7, nowMs: 1_050)
    var log = HeartbeatLog()
    hb.run(until: 20_000, log: &log)
    #expect(log.pings(of: 7) == [2_100, 3_100])
    // Timed out at the first check at or after 1 050 + 3 000, within one quantum.
    #expect(log.timeouts(of: 7) == [4_100])
    #expect(hb.nextDeadlineMs == nil)  // reported once, checked no more
  }

  @Test func anInboundFrameDefersTheTimeout() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    let slot = hb.opened(7, nowMs: 1_000)
    var log = HeartbeatLog()
    hb.run(until: 3_500, log: &log)
    hb.inbound(slot, nowMs: 3_500)
    hb.run(until: 20_000, log: &log)
    #expect(log.timeouts(of: 7) == [6_500])
  }

  @Test func anInboundFrameIsAStoreAndFilesNoCheck() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    let slot = hb.opened(7, nowMs: 1_000)
    let before = hb.pendingChecks
    for t in 1_001...3_000 { hb.inbound(slot, nowMs: Int64(t)) }
    #expect(hb.pendingChecks == before)
    #expect(hb.nextDeadlineMs == 2_000)
  }

  @Test func aClosedConnectionIsForgottenAndItsSlotReused() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    let old = hb.opened(1, nowMs: 1_000)
    hb.closed(old)
    #expect(hb.openCount == 0)
    let new = hb.opened(2, nowMs: 1_500)
    #expect(new != old)  // the same place, a new generation
    hb.inbound(old, nowMs: 4_000)  // a stale handle touches nothing
    var log = HeartbeatLog()
    hb.run(until: 20_000, log: &log)
    #expect(log.pings(of: 1).isEmpty && log.timeouts(of: 1).isEmpty)
    #expect(log.timeouts(of: 2) == [4_500])
    hb.closed(old)  // closing twice, or a stale handle, changes nothing
    #expect(hb.openCount == 1)
  }

  /// Connections opened over one quantum share their checks: one `due` call pings
  /// them all, whatever their number.
  @Test func checksDueInOneQuantumFireInOneCall() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000)
    var slots: [UInt64: Heartbeats.Slot] = [:]
    for i in 0..<1_000 { slots[UInt64(i)] = hb.opened(UInt64(i), nowMs: 1_001 + Int64(i) / 10) }
    var log = HeartbeatLog()
    hb.run(until: 2_100, answering: slots, log: &log)
    #expect(log.pings.count == 1_000)
    #expect(log.calls == 1)
    #expect(Set(log.pings.map(\.atMs)) == [2_100])
  }

  @Test func aCallStopsAtItsBoundAndTheRestStayDue() {
    var hb = Heartbeats(intervalMs: 0, timeoutMs: 1_000, maxChecksPerCall: 4)
    for i in 0..<10 { _ = hb.opened(UInt64(i), nowMs: 1_000) }
    #expect(hb.due(nowMs: 2_000).timedOut.count == 4)
    #expect(hb.nextDeadlineMs == 2_000)  // already due: the shell calls again next turn
    #expect(hb.due(nowMs: 2_001).timedOut.count == 4)
    #expect(hb.due(nowMs: 2_002).timedOut == [8, 9])
    #expect(hb.nextDeadlineMs == nil)
  }

  @Test func timeoutsAreBoundedPerCallToo() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 3_000, maxTimeoutsPerCall: 3)
    for i in 0..<7 { _ = hb.opened(UInt64(i), nowMs: 1_000) }
    #expect(hb.due(nowMs: 4_000).timedOut == [0, 1, 2])
    #expect(hb.nextDeadlineMs.map { $0 <= 4_000 } == true)  // still due: next turn
    #expect(hb.due(nowMs: 4_001).timedOut == [3, 4, 5])
    #expect(hb.due(nowMs: 4_002).timedOut == [6])
    #expect(hb.nextDeadlineMs == nil)
  }

  @Test func aZeroIntervalSendsNoPings() {
    var hb = Heartbeats(intervalMs: 0, timeoutMs: 3_000)
    _ = hb.opened(7, nowMs: 1_000)
    var log = HeartbeatLog()
    hb.run(until: 20_000, log: &log)
    #expect(log.pings.isEmpty)
    #expect(log.timeouts(of: 7) == [4_200])  // 1 000 + 3 000, up to the 300 ms quantum
  }

  @Test func aZeroTimeoutNeverTimesOut() {
    var hb = Heartbeats(intervalMs: 1_000, timeoutMs: 0)
    _ = hb.opened(7, nowMs: 1_000)
    var log = HeartbeatLog()
    hb.run(until: 10_000, log: &log)
    #expect(log.pings(of: 7).count == 9)
    #expect(log.timeouts.isEmpty)
  }

  @Test func bothZeroHoldsNothing() {
    var hb = Heartbeats(intervalMs: 0, timeoutMs: -1)
    let slot = hb.opened(7, nowMs: 1_000)
    #expect(slot == .none)
    #expect(hb.nextDeadlineMs == nil && hb.openCount == 0)
    hb.inbound(slot, nowMs: 2_000)
    hb.closed(slot)
  }
}
