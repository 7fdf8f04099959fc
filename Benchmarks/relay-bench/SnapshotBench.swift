import EventLoop
import RelayCore

/// A cluster snapshot's cost on the loop and off it (docs/cluster.md, "Bounded
/// history"), the core alone: 256 sessions whose replay logs hold 1 MiB of ~1 KB
/// messages each (the default budget, as `Benchmarks/cluster.py scale-big` fills it),
/// and 100 000 participants in 1 000 sessions of 100 (`participants SxM`: S sessions
/// of M, e.g. `1000x1000`, the default budgets' million participants).
enum SnapshotBench {
  /// `only`: "replay" or "participants" runs that half alone; `size`: "SxM".
  static func run(only: String? = nil, size: String? = nil) {
    print("== snapshot: the loop's share (capture) and the rest (joined), median of 5")
    if only != "participants" {
      let replay = replayCore(sessions: 256, messages: 1_100)
      report("256 MiB of replay (256 sessions × ~1 000 events of ~1 KB)", replay.core, next: replay.next)
    }
    if only != "replay" {
      let dims = (size ?? "1000x100").split(separator: "x").compactMap { Int($0) }
      let (sessions, members) = dims.count == 2 ? (dims[0], dims[1]) : (1_000, 100)
      let core = membersCore(sessions: sessions, members: members)
      let t = Loop.hrtimeNs()
      withExtendedLifetime(core.snapshotParts()) {}
      print("  the first capture (records kept from the start, as a replica keeps them): \(fmt(seconds(since: t) * 1e3, 2)) ms")
      var touch = Touch(sessions: sessions)
      pings(into: core, connections: sessions * members, &touch)
      restored(core)
      report("\(sessions * members) participants (\(sessions) sessions × \(members))", core) { touch.messages(into: $0, sessions) }
      for k in [1, 10, 100, sessions] where k <= sessions {
        let ms = median(runs: 3) {
          touch.joinsAndMessages(into: core, k)
          let t = Loop.hrtimeNs()
          withExtendedLifetime(core.snapshotParts()) {}
          return seconds(since: t) * 1e3
        }
        print("  capture after a join and a message into each of \(k) sessions: \(fmt(ms, 2)) ms")
      }
    }
  }

  static func report(_ label: String, _ core: RelayCore, next: ((RelayCore) -> Void)?) {
    var size = 0
    let capture = median {
      let t = Loop.hrtimeNs()
      withExtendedLifetime(core.snapshotParts()) {}
      return seconds(since: t) * 1e3
    }
    let joined = median(runs: 3) {
      let parts = core.snapshotParts()
      let t = Loop.hrtimeNs()
      size = parts.joined().count
      return seconds(since: t) * 1e3
    }
    print("  \(label): \(fmt(Double(size) / 1e6)) MB; capture \(fmt(capture, 2)) ms on the loop, joined \(fmt(joined, 0)) ms off it")
    guard let next else { return }
    // The first event into every session after a capture copies what the capture
    // shares (at most two chunks and the chunk list per log): spread over the turns
    // that touch each session.
    // Once untimed first: the first message after the state was built expires what
    // the building left in the replay logs and compacts the eviction order, a cost
    // of its own that any first message would pay, capture or not.
    next(core)
    let held = core.snapshotParts()
    let t = Loop.hrtimeNs()
    next(core)
    let after = seconds(since: t) * 1e3
    withExtendedLifetime(held) {}
    let t2 = Loop.hrtimeNs()
    next(core)
    print("  one message into each session after a capture: \(fmt(after, 1)) ms (without a capture: \(fmt(seconds(since: t2) * 1e3, 1)) ms)")
  }

  /// A ping from every connection changes every connection's record (its last inbound
  /// time): the capture after them, and what the pings cost after a capture (which
  /// the first change to each bucket copies) and without one.
  static func pings(into core: RelayCore, connections: Int, _ touch: inout Touch) {
    let ping = Array(#"{"type":"ping"}"#.utf8)
    func all() -> Double {
      let t = Loop.hrtimeNs()
      for i in 0..<connections {
        core.receive(ConnectionID(UInt64(i + 1)), text: ping, at: touch.at())
        if i % 64 == 63 { _ = core.takeEffects() }
      }
      _ = core.takeEffects()
      return seconds(since: t) * 1e3
    }
    let held = core.snapshotParts()
    let after = all()
    withExtendedLifetime(held) {}
    let without = all()
    let capture = median(runs: 3) {
      _ = all()
      let t = Loop.hrtimeNs()
      withExtendedLifetime(core.snapshotParts()) {}
      return seconds(since: t) * 1e3
    }
    print("  capture after a ping from each of \(connections) connections: \(fmt(capture, 2)) ms (median of 3)")
    print("  those pings: \(fmt(after, 0)) ms after a capture, \(fmt(without, 0)) ms without")
  }

  /// A core restored from the snapshot bytes, as a starting node or a data dir's
  /// restart restores it: the restore, then its first capture.
  static func restored(_ core: RelayCore) {
    let bytes = core.snapshot()
    let t = Loop.hrtimeNs()
    guard
      let copy = try? RelayCore(
        restoring: bytes, config: core.config, ids: CoreBench.Ids(), verifyToken: { _, _ in nil }, canonical: false)
    else { return print("  restore failed") }
    let restore = seconds(since: t) * 1e3
    let t2 = Loop.hrtimeNs()
    withExtendedLifetime(copy.snapshotParts()) {}
    print("  restore \(fmt(restore, 0)) ms, then its first capture: \(fmt(seconds(since: t2) * 1e3, 2)) ms")
  }

  /// `sessions` sessions of one member each, `messages` ~1 KB messages into each.
  static func replayCore(sessions: Int, messages: Int) -> (core: RelayCore, next: (RelayCore) -> Void) {
    var config = CoreConfig(devMode: true, serverVersion: "bench")
    config.messageRate = 1_000_000
    config.replayBudgetBytes = (sessions + 16) << 20
    let core = RelayCore(config: config, ids: CoreBench.Ids(), verifyToken: { _, _ in nil })
    var t: Int64 = 1_000
    for i in 0..<sessions {
      let c = ConnectionID(UInt64(i + 1))
      let at = Instant(monoMs: t, wallMs: 1_700_000_000_000 + t)
      core.open(c, at: at)
      core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"u\#(i)","name":"User \#(i)"}}"#.utf8), at: at)
      core.receive(c, text: Array(#"{"type":"session.join","session":"s\#(i)"}"#.utf8), at: at)
    }
    let pad = String(repeating: "x", count: 1_000)
    var n = 0
    let send = { (core: RelayCore) in
      for i in 0..<sessions {
        n += 1
        t += 1
        let text = Array(#"{"type":"message.send","session":"s\#(i)","data":{"i":\#(n),"p":"\#(pad)"}}"#.utf8)
        core.receive(ConnectionID(UInt64(i + 1)), text: text, at: Instant(monoMs: t, wallMs: 1_700_000_000_000 + t))
      }
      _ = core.takeEffects()
    }
    for _ in 0..<messages { send(core) }
    return (core, send)
  }

  /// Changes between captures: new members and messages in the first k sessions
  /// (connection i + 1 is a member of session s(i mod sessions)).
  struct Touch {
    let sessions: Int
    var t: Int64 = 1 << 40
    var next: UInt64 = 1 << 40

    mutating func at() -> Instant {
      t += 1
      return Instant(monoMs: t, wallMs: 1_700_000_000_000 + t)
    }

    mutating func messages(into core: RelayCore, _ k: Int) {
      for i in 0..<k {
        let text = Array(#"{"type":"message.send","session":"s\#(i)","data":{"t":\#(t)}}"#.utf8)
        core.receive(ConnectionID(UInt64(i + 1)), text: text, at: at())
      }
      _ = core.takeEffects()
    }

    mutating func joinsAndMessages(into core: RelayCore, _ k: Int) {
      for i in 0..<k {
        next += 1
        let c = ConnectionID(next)
        let now = at()
        core.open(c, at: now)
        core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"v\#(next)","name":"V"}}"#.utf8), at: now)
        core.receive(c, text: Array(#"{"type":"session.join","session":"s\#(i)"}"#.utf8), at: now)
        _ = core.takeEffects()
      }
      messages(into: core, k)
      _ = core.nextDeadline
    }
  }

  /// `sessions` × `members` participants, each on a connection of its own.
  static func membersCore(sessions: Int, members: Int) -> RelayCore {
    var config = CoreConfig(devMode: true, serverVersion: "bench")
    config.joinRate = 1_000_000
    config.sessionJoinRate = 1_000_000
    config.messageRate = 1_000_000
    config.maxParticipants = 1 << 20
    let core = RelayCore(config: config, ids: CoreBench.Ids(), verifyToken: { _, _ in nil })
    core.keepSnapshotRecords()  // as every replica's core (cluster, data dir) does
    var t: Int64 = 1_000
    for i in 0..<(sessions * members) {
      let c = ConnectionID(UInt64(i + 1))
      t += 1
      let at = Instant(monoMs: t, wallMs: 1_700_000_000_000 + t)
      core.open(c, at: at)
      core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"u\#(i)","name":"User \#(i)"}}"#.utf8), at: at)
      core.receive(c, text: Array(#"{"type":"session.join","session":"s\#(i % sessions)"}"#.utf8), at: at)
      if i % 1_000 == 0 { _ = core.takeEffects() }
    }
    _ = core.takeEffects()
    _ = core.nextDeadline  // as the shell asks each turn: the moot hello timeouts go
    return core
  }
}
