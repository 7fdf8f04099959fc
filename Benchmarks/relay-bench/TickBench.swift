import RelayPrimitives

#if canImport(Glibc)
  import Glibc
#endif

/// §5 heartbeats in the shell's pure machine (RelayPrimitives `Heartbeats`): N idle
/// connections (every pong answered at once), driven over simulated time with `due`
/// at every `nextDeadlineMs`, as the shell's one timer does. Shows that the work per
/// call is the checks actually due (pings), not the number of connections: CPU per
/// fired check, per empty call and per inbound frame stay flat from 5 000 to 19 900
/// connections; CPU per simulated second grows only with the pings that must be sent
/// (N / interval).
enum TickBench {
  static let sizes = [5_000, 19_900]
  static let simulatedMs: Int64 = 60_000

  static func run() {
    print("== tick: heartbeats of idle connections, shell machine (interval 10 000 ms, timeout 15 000 ms, \(simulatedMs / 1000) s simulated, median of 3)")
    for n in sizes {
      let runs = (0..<3).map { _ in drive(connections: n) }.sorted { $0.nsPerFired < $1.nsPerFired }
      let r = runs[1]  // the median run, by CPU per fired check
      print(
        "  \(n) connections: \(fmt(r.cpuNsPerSimulatedSecond / 1e3, 1)) µs CPU per simulated s; "
          + "\(r.ticks) due calls, \(fmt(Double(r.fired) / Double(r.ticks), 2)) checks per call, "
          + "\(fmt(r.nsPerTick, 0)) ns per call, \(fmt(r.nsPerFired, 0)) ns per fired check (ping + pong); "
          + "empty call \(fmt(r.nsPerEmptyTick, 0)) ns; inbound frame \(fmt(r.nsPerAlive, 0)) ns; "
          + "\(r.queued) checks queued")
      print(
        "    heartbeat checks in `due` alone (no pong handling): \(fmt(r.tickNs / Double(max(r.fired, 1)), 0)) ns per check, "
          + "\(fmt(Double(r.fired) / (r.tickNs / 1e9) / 1e6, 2)) M checks per CPU second")
    }
  }

  struct Result {
    var ticks = 0
    var fired = 0
    var cpuNs: Double = 0
    /// CPU spent inside `tick` only.
    var tickNs: Double = 0
    var nsPerEmptyTick: Double = 0
    var nsPerAlive: Double = 0
    var queued = 0
    var cpuNsPerSimulatedSecond: Double { cpuNs / Double(TickBench.simulatedMs) * 1_000 }
    var nsPerTick: Double { cpuNs / Double(max(ticks, 1)) }
    var nsPerFired: Double { cpuNs / Double(max(fired, 1)) }
  }

  static func cpuNs() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) * 1e9 + Double(ts.tv_nsec)
  }

  /// Fires every check up to `end`, answering each ping with a pong (`inbound`).
  /// Returns (due calls, pings).
  @discardableResult
  static func drive(_ hb: inout Heartbeats, _ slots: [Heartbeats.Slot], until end: Int64) -> (Int, Int) {
    var ignored: Double = 0
    return drive(&hb, slots, until: end, tickNs: &ignored)
  }

  static func drive(_ hb: inout Heartbeats, _ slots: [Heartbeats.Slot], until end: Int64, tickNs: inout Double) -> (Int, Int) {
    var ticks = 0
    var pings = 0
    while let next = hb.nextDeadlineMs, next <= end {
      let t0 = cpuNs()
      let due = hb.due(nowMs: next)
      tickNs += cpuNs() - t0
      ticks += 1
      for id in due.ping {
        pings += 1
        hb.inbound(slots[Int(id)], nowMs: next)
      }
    }
    return (ticks, pings)
  }

  /// Connections arrive spread over one heartbeat interval (as real ones do, so their
  /// checks are spread too); then `simulatedMs` is measured.
  static func drive(connections n: Int) -> Result {
    var hb = Heartbeats(intervalMs: 10_000, timeoutMs: 15_000, maxChecksPerCall: 256)
    var slots: [Heartbeats.Slot] = []
    let spreadMs: Int64 = 10_000
    for i in 0..<n {
      let t = 1_000 + Int64(i) * spreadMs / Int64(n)
      drive(&hb, slots, until: t)
      slots.append(hb.opened(UInt64(i), nowMs: t))
    }
    let start: Int64 = 1_000 + spreadMs
    drive(&hb, slots, until: start)
    var r = Result()
    let t0 = cpuNs()
    (r.ticks, r.fired) = drive(&hb, slots, until: start + simulatedMs, tickNs: &r.tickNs)
    r.cpuNs = cpuNs() - t0
    r.queued = hb.pendingChecks
    // An empty call (nothing due) and an inbound frame: both must be O(1).
    let idleAt = (hb.nextDeadlineMs ?? start + simulatedMs) - 1
    let rounds = 100_000
    var t1 = cpuNs()
    for _ in 0..<rounds { _ = hb.due(nowMs: idleAt) }
    r.nsPerEmptyTick = (cpuNs() - t1) / Double(rounds)
    t1 = cpuNs()
    for k in 0..<rounds { hb.inbound(slots[k % n], nowMs: idleAt) }
    r.nsPerAlive = (cpuNs() - t1) / Double(rounds)
    return r
  }
}
