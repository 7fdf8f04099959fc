import CAllocCounter
import EventLoop
import RelayCore
import RelayProtocol

/// The pure core alone: raise/lower churn in one 1 000-member session, and heap
/// traffic per fan-out delivery of `message.send`.
enum CoreBench {
  static let members = 1000

  static func run() {
    print("== core: one session of \(members) members (median of 5)")
    var deliveriesPerEvent = 0
    let rate = median {
      let (r, d) = churn(commands: 20_000)
      deliveriesPerEvent = d
      return r
    }
    print("  raise/lower churn: \(fmt(rate, 0)) events applied/s (\(deliveriesPerEvent) recipients each, \(fmt(rate * Double(deliveriesPerEvent) / 1e6, 2)) M deliveries/s)")
    let before = relay_live_bytes()
    let (held, _) = populated()
    let perMember = Double(relay_live_bytes() - before) / Double(members)
    withExtendedLifetime(held) {}
    print("  heap held by the core per joined member (hello + join, 1 000 in one session): \(fmt(perMember, 0)) B")
    breakdown()
    let (allocsPerEvent, bytesPerDelivery) = allocationsPerFanOut(events: 2000)
    print("  message.send fan-out: \(fmt(allocsPerEvent, 1)) allocations per event, \(fmt(bytesPerDelivery, 2)) bytes allocated per delivery")
  }

  final class Ids: IdentifierSource {
    var n = 0
    func token(byteCount: Int) -> String {
      n += 1
      return "id\(n)"
    }
  }

  /// Production-shaped ids: URL-safe base64 of `byteCount` bytes (16 and 32 characters
  /// for the connection id and the resume token), so long strings cost what they do in
  /// the relay. Deterministic, so runs compare.
  final class LongIds: IdentifierSource {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    func token(byteCount: Int) -> String {
      var out: [UInt8] = []
      for _ in 0..<((byteCount * 8 + 5) / 6) {
        state = state &* 6_364_136_223_846_793_005 &+ 1_442_695_040_888_963_407
        out.append(Self.alphabet[Int(state >> 58)])
      }
      return String(decoding: out, as: UTF8.self)
    }
  }

  /// Where the bytes per member go: after `open`, after `hello`, after `join`, at two
  /// sizes (sessions of 1 000), with short ids (as above) and production-length ones.
  static func breakdown() {
    for (label, long) in [("short ids", false), ("production-length ids", true)] {
      for n in [1_000, 10_000] {
        let (open, hello, join) = phases(members: n, ids: long ? LongIds() : Ids())
        print(
          "    \(n) members, \(label): \(fmt(open + hello + join, 0)) B per member "
            + "(open \(fmt(open, 0)), hello \(fmt(hello, 0)), join \(fmt(join, 0)))")
      }
    }
  }

  static func phases(members n: Int, ids: any IdentifierSource) -> (Double, Double, Double) {
    let base = relay_live_bytes()
    let core = RelayCore(config: CoreConfig(devMode: true, serverVersion: "bench"), ids: ids, verifyToken: { _, _ in nil })
    let at = Instant(monoMs: 1_000, wallMs: 1_700_000_001_000)
    let hellos = (0..<n).map { Array(#"{"type":"hello","dev":{"uid":"u\#($0)","name":"User \#($0)"}}"#.utf8) }
    let joins = (0..<n).map { Array(#"{"type":"session.join","session":"room\#($0 / 1000)"}"#.utf8) }
    let start = relay_live_bytes()
    for i in 0..<n { core.open(ConnectionID(UInt64(i + 1)), at: at) }
    let opened = relay_live_bytes()
    for i in 0..<n {
      core.receive(ConnectionID(UInt64(i + 1)), text: hellos[i], at: at)
      _ = core.takeEffects()
    }
    let welcomed = relay_live_bytes()
    for i in 0..<n {
      core.receive(ConnectionID(UInt64(i + 1)), text: joins[i], at: at)
      _ = core.takeEffects()
    }
    let joined = relay_live_bytes()
    withExtendedLifetime((core, hellos, joins, base)) {}
    let m = Double(n)
    return (Double(opened - start) / m, Double(welcomed - opened) / m, Double(joined - welcomed) / m)
  }

  static func populated() -> (RelayCore, Int64) {
    var config = CoreConfig(devMode: true, serverVersion: "bench")
    // 1 000 members join one session within a second: past the §5.2 session join
    // budget, which would refuse most of them.
    config.sessionJoinRate = 0
    let core = RelayCore(config: config, ids: Ids(), verifyToken: { _, _ in nil })
    var t: Int64 = 1_000
    for i in 0..<members {
      let c = ConnectionID(UInt64(i + 1))
      let at = Instant(monoMs: t, wallMs: 1_700_000_000_000 + t)
      core.open(c, at: at)
      core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"u\#(i)","name":"User \#(i)"}}"#.utf8), at: at)
      core.receive(c, text: Array(#"{"type":"session.join","session":"room"}"#.utf8), at: at)
      _ = core.takeEffects()
      t += 1
    }
    return (core, t)
  }

  /// Each command is a raise or lower by a rotating member, so no one hits the
  /// 10-per-10 s limit; virtual time advances 1 ms per command.
  static func churn(commands: Int) -> (Double, Int) {
    let (core, t0) = populated()
    let raise = Array(#"{"type":"hand.raise","session":"room"}"#.utf8)
    let lower = Array(#"{"type":"hand.lower","session":"room"}"#.utf8)
    var recipients = 0
    var events = 0
    let start = Loop.hrtimeNs()
    for k in 0..<commands {
      let member = k % members
      let c = ConnectionID(UInt64(member + 1))
      let t = t0 + Int64(k)
      core.receive(c, text: (k / members) % 2 == 0 ? raise : lower, at: Instant(monoMs: t, wallMs: 1_700_000_000_000 + t))
      for case .send(_, let to) in core.takeEffects() where to.count > 1 {
        events += 1
        recipients = to.count
      }
    }
    let elapsed = seconds(since: start)
    precondition(events == commands, "expected one fan-out event per command, got \(events)")
    return (Double(events) / elapsed, recipients)
  }

  static func allocationsPerFanOut(events: Int) -> (Double, Double) {
    let (core, t0) = populated()
    let send = Array(#"{"type":"message.send","session":"room","data":{"t":1234567890,"n":42}}"#.utf8)
    var deliveries = 0
    relay_alloc_reset()
    relay_alloc_counting(1)
    for k in 0..<events {
      let t = t0 + Int64(k) * 100
      core.receive(ConnectionID(UInt64(k % members + 1)), text: send, at: Instant(monoMs: t, wallMs: 1_700_000_000_000 + t))
      for case .send(_, let to) in core.takeEffects() { deliveries += to.count }
    }
    relay_alloc_counting(0)
    return (Double(relay_alloc_count()) / Double(events), Double(relay_alloc_bytes()) / Double(deliveries))
  }
}
