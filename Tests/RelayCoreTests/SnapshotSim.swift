// The seeded driver of SnapshotTests: random inputs of every kind a replica applies
// from the shared log (opens, commands, clean and unclean closes, ticks at advancing
// times, HTTP call actions, admin actions), fed to a primary core and, once it has been
// restored from the primary's snapshot, to a twin as well. Every input's effects and
// results must be byte-identical on both (docs/cluster.md: replicas agree effect for
// effect), and so must their snapshots. Like SimWorld, the driver acts as the shell:
// closes come back as `closed`, and its §5 heartbeats (RelayPrimitives `Heartbeats`,
// node-local, never in a snapshot) ping the connections, which pong unless silent, and
// drop a silent one, logged to both cores as `closed(clean: false)`.
import RelayProtocol

@testable import RelayCore
import RelayPrimitives

/// Token mode for the simulation: "uid.role" is valid; sessions s0 and s1 only, so
/// call sessions are reached through grants (§3).
func snapshotSimIdentity(_ token: String, _ wallMs: Int64) -> Identity? {
  let parts = token.split(separator: ".").map(String.init)
  guard parts.count == 2, TwinSim.users.contains(parts[0]) else { return nil }
  return Identity(
    uid: parts[0], name: parts[0].uppercased(), avatar: parts[0] == "u1" ? "a.png" : nil,
    role: parts[1] == "host" ? .host : .participant, sessions: .only(["s0", "s1"]))
}

final class TwinSim {
  static let users = ["u0", "u1", "u2", "u3", "u4"]

  let seed: UInt64
  var rng: SeededRandom
  let config: CoreConfig
  let primary: RelayCore
  let primaryIds: SeededIDs
  var twin: RelayCore?
  var twinIds: SeededIDs?
  var now = Instant(monoMs: 1_000, wallMs: 1_700_000_000_000)
  var nextConnection: UInt64 = 1
  var step = 0
  var failures: [String] = []
  /// Effects compared between the two cores, and restores done.
  var compared = 0
  var restores = 0
  /// The twin's event counts at its (first) restore, to count what ran after it.
  var eventsAtRestore: [String: UInt64] = [:]

  // The shell's view, from the primary's effects.
  var open: Set<UInt64> = []
  var uidOf: [UInt64: String] = [:]
  var silent: Set<UInt64> = []
  var heartbeats: Heartbeats
  var slots: [UInt64: Heartbeats.Slot] = [:]
  /// Silent connections the shell's heartbeats dropped after the twin's restore.
  var heartbeatDrops = 0
  /// Resume tokens seen in `welcome`, with their user and connection.
  var tokens: [(uid: String, token: String, c: UInt64)] = []
  /// Last seq seen per connection and session.
  var seqs: [UInt64: [String: Int64]] = [:]
  var sessionIds = ["s0", "s1", "s2"]
  var callIds: [String] = []

  init(seed: UInt64) {
    self.seed = seed
    rng = SeededRandom(seed: seed)
    var config = CoreConfig(devMode: seed % 3 != 0, serverVersion: "twin")
    config.heartbeatIntervalMs = 1_000
    config.heartbeatTimeoutMs = 3_000
    config.helloTimeoutMs = 4_000
    config.graceMs = 5_000
    config.backgroundGraceMs = 12_000
    config.ringTimeoutMs = 10_000
    config.idleTimeoutMs = [8_000, 30_000, 0][rng.below(3)]
    config.replayEvents = [4, 16, 1_000][rng.below(3)]
    config.replayAgeMs = [6_000, 300_000][rng.below(2)]
    config.replayBytes = [0, 700, 1 << 20][rng.below(3)]
    config.replayBudgetBytes = [0, 1_500, 256 << 20][rng.below(3)]
    config.maxEndedCalls = [2, 10_000][rng.below(2)]
    config.handRate = [3, 1_000][rng.below(2)]
    config.messageRate = [3, 1_000][rng.below(2)]
    config.joinRate = [4, 20][rng.below(2)]
    config.maxParticipants = [3, 1_000][rng.below(2)]
    config.maxSessionsPerConnection = [2, 16][rng.below(2)]
    config.sessionWebhooks = rng.chance(50)
    self.config = config
    heartbeats = Heartbeats(intervalMs: config.heartbeatIntervalMs, timeoutMs: config.heartbeatTimeoutMs)
    primaryIds = SeededIDs(prefix: "t\(seed)-", long: seed % 2 == 1)
    primary = RelayCore(config: config, ids: primaryIds, verifyToken: snapshotSimIdentity)
  }

  func fail(_ message: String) {
    if failures.count < 5 { failures.append("seed \(seed) step \(step) t=\(now.monoMs): \(message)") }
  }

  // MARK: Restoring

  /// A fresh core from `core`'s snapshot, with an id source at the same position.
  func restored(from core: RelayCore, ids: SeededIDs) -> (RelayCore, SeededIDs)? {
    let bytes = core.snapshot()
    let copy = SeededIDs(prefix: ids.prefix, long: ids.long)
    copy.counter = ids.counter
    do {
      let restored = try RelayCore(restoring: bytes, config: config, ids: copy, verifyToken: snapshotSimIdentity)
      if restored.snapshot() != bytes { fail("restored core snapshots differently") }
      return (restored, copy)
    } catch {
      fail("restore of a real snapshot refused: \(error)")
      return nil
    }
  }

  /// The twin from the primary (first time) or from itself (a chain of restores).
  func restoreTwin() {
    let source = twin ?? primary
    guard let (core, ids) = restored(from: source, ids: twinIds ?? primaryIds) else { return }
    if twin == nil { eventsAtRestore = core.stats.eventsByType }
    twin = core
    twinIds = ids
    restores += 1
  }

  // MARK: Applying inputs to both

  /// Runs one input on each core; its result bytes and effects must agree. The
  /// primary's effects then drive the shell's view (and closes).
  func apply(_ input: (RelayCore) -> [UInt8]) {
    let result = input(primary)
    let effects = primary.takeEffects()
    if let twin {
      let twinResult = input(twin)
      let twinEffects = twin.takeEffects()
      compared += effects.count
      if twinResult != result { fail("results differ") }
      let a = effects.map(Self.bytes)
      let b = twinEffects.map(Self.bytes)
      if a != b {
        let i = (0..<min(a.count, b.count)).first { a[$0] != b[$0] } ?? min(a.count, b.count)
        let show = { (e: [Effect]) in i < e.count ? Harness.render(e[i]) : "nothing" }
        fail("effect \(i) differs: primary \(show(effects)) / twin \(show(twinEffects))")
      }
    }
    observe(effects)
  }

  /// An effect as bytes: kind, recipients or connection, payload.
  static func bytes(_ effect: Effect) -> [UInt8] {
    var w = BinaryWriter()
    switch effect {
    case .send(let payload, let to):
      w.u8(0)
      w.count(to.count)
      for c in to { w.u64(c.raw) }
      w.bytes(payload.bytes)
    case .close(let c, let code, let reason): w.u8(2); w.u64(c.raw); w.u32(UInt32(code)); w.string(reason)
    case .webhook(let event, let body): w.u8(4); w.string(event); w.bytes(body.bytes)
    case .push(let job): w.u8(5); w.string(job.description)
    }
    return w.bytes
  }

  func observe(_ effects: [Effect]) {
    var ends: [UInt64] = []
    for effect in effects {
      switch effect {
      case .send(let payload, let to):
        guard let message = try? JSONParser.parse(payload.bytes) else {
          fail("unparsable output")
          continue
        }
        for c in to { received(message, by: c.raw) }
      case .close(let c, _, _): ends.append(c.raw)
      case .webhook, .push: break
      }
    }
    for c in ends { close(c, clean: true) }
  }

  func received(_ message: JSONValue, by c: UInt64) {
    let type = message["type"]?.stringValue ?? ""
    let session = message["session"]?.stringValue
    if let id = message["callId"]?.stringValue, !callIds.contains(id) { callIds.append(id) }
    if let id = message["sessionId"]?.stringValue, !sessionIds.contains(id) { sessionIds.append(id) }
    switch type {
    case "welcome":
      if let token = message["resumeToken"]?.stringValue, let uid = uidOf[c] { tokens.append((uid, token, c)) }
    case "session.left", "session.timed_out":
      if let session { seqs[c]?[session] = nil }
    default:
      if let session, let seq = message["seq"]?.numberValue?.int64 { seqs[c, default: [:]][session] = seq }
    }
  }

  func close(_ c: UInt64, clean: Bool) {
    guard open.remove(c) != nil else { return }
    if let slot = slots.removeValue(forKey: c) { heartbeats.closed(slot) }
    apply { $0.closed(ConnectionID(c), clean: clean, at: self.now); return [] }
  }

  /// The shell's heartbeat checks due now: open connections that are not silent pong
  /// (no core input: liveness is the shell's); a silent one past the timeout is
  /// dropped and both cores get its unclean close.
  func heartbeatsDue() {
    let due = heartbeats.due(nowMs: now.monoMs)
    for c in due.ping where open.contains(c) && !silent.contains(c) {
      if let slot = slots[c] { heartbeats.inbound(slot, nowMs: now.monoMs) }
    }
    for c in due.timedOut where open.contains(c) {
      if twin != nil { heartbeatDrops += 1 }
      close(c, clean: false)
    }
  }
}
