import RelayCore

#if canImport(Glibc)
  import Glibc
#endif

/// §5 heartbeats in the pure core: N idle joined connections (sessions of 50, every
/// pong answered at once), driven over simulated time with `tick` at every
/// `nextDeadline`, as the shell's one timer would. Shows that the work per tick is
/// the deadlines actually due (pings), not the number of connections: CPU per fired
/// deadline, per empty tick and per inbound frame stay flat from 5 000 to 19 900
/// connections; CPU per simulated second grows only with the pings that must be sent
/// (N / interval).
enum TickBench {
  static let sizes = [5_000, 19_900]
  static let simulatedMs: Int64 = 60_000

  static func run() {
    print("== tick: heartbeats of idle joined connections, pure core (interval 10 000 ms, timeout 15 000 ms, \(simulatedMs / 1000) s simulated, median of 3)")
    for n in sizes {
      let runs = (0..<3).map { _ in drive(connections: n) }.sorted { $0.nsPerFired < $1.nsPerFired }
      let r = runs[1]  // the median run, by CPU per fired deadline
      print(
        "  \(n) connections: \(fmt(r.cpuNsPerSimulatedSecond / 1e3, 1)) µs CPU per simulated s; "
          + "\(r.ticks) ticks, \(fmt(Double(r.fired) / Double(r.ticks), 2)) deadlines due per tick, "
          + "\(fmt(r.nsPerTick, 0)) ns per tick, \(fmt(r.nsPerFired, 0)) ns per fired deadline (ping + pong); "
          + "empty tick \(fmt(r.nsPerEmptyTick, 0)) ns; inbound frame \(fmt(r.nsPerAlive, 0)) ns; "
          + "\(r.queued) deadlines queued")
      print(
        "    heartbeat checks in `tick` alone (no pong handling): \(fmt(r.tickNs / Double(max(r.fired, 1)), 0)) ns per check, "
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

  static func instant(_ mono: Int64) -> Instant { Instant(monoMs: mono, wallMs: 1_700_000_000_000 + mono) }

  /// Fires every deadline up to `end`, answering each ping with a pong (`alive`).
  /// Returns (ticks, pings).
  @discardableResult
  static func drive(_ core: RelayCore, until end: Int64) -> (Int, Int) {
    var ignored: Double = 0
    return drive(core, until: end, tickNs: &ignored)
  }

  static func drive(_ core: RelayCore, until end: Int64, tickNs: inout Double) -> (Int, Int) {
    var ticks = 0
    var pings = 0
    while let next = core.nextDeadline, next <= end {
      let at = instant(next)
      let t0 = cpuNs()
      core.tick(at: at)
      tickNs += cpuNs() - t0
      ticks += 1
      for effect in core.takeEffects() {
        if case .ping(let c) = effect {
          pings += 1
          core.alive(c, at: at)
        }
      }
    }
    return (ticks, pings)
  }

  /// Connections arrive spread over one heartbeat interval (as real ones do, so their
  /// deadlines are spread too), say hello and join; then `simulatedMs` is measured.
  static func drive(connections n: Int) -> Result {
    let core = RelayCore(
      config: CoreConfig(devMode: true, serverVersion: "bench"), ids: CoreBench.Ids(), verifyToken: { _, _ in nil })
    let spreadMs: Int64 = 10_000
    for i in 0..<n {
      let t = 1_000 + Int64(i) * spreadMs / Int64(n)
      drive(core, until: t)
      let c = ConnectionID(UInt64(i + 1))
      core.open(c, at: instant(t))
      core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"u\#(i)","name":"U\#(i)"}}"#.utf8), at: instant(t))
      core.receive(c, text: Array(#"{"type":"session.join","session":"room\#(i / 50)"}"#.utf8), at: instant(t))
      _ = core.takeEffects()
    }
    let start: Int64 = 1_000 + spreadMs
    drive(core, until: start)
    var r = Result()
    let t0 = cpuNs()
    (r.ticks, r.fired) = drive(core, until: start + simulatedMs, tickNs: &r.tickNs)
    r.cpuNs = cpuNs() - t0
    r.queued = core.debugDeadlineCount
    // An empty tick (nothing due) and an inbound frame: both must be O(1).
    let idleAt = instant(start + simulatedMs)
    let rounds = 100_000
    var t1 = cpuNs()
    for _ in 0..<rounds { core.tick(at: idleAt) }
    r.nsPerEmptyTick = (cpuNs() - t1) / Double(rounds)
    t1 = cpuNs()
    for k in 0..<rounds { core.alive(ConnectionID(UInt64(k % n + 1)), at: idleAt) }
    r.nsPerAlive = (cpuNs() - t1) / Double(rounds)
    return r
  }
}
