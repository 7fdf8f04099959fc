// The deterministic world of SimulationTests: one core, a virtual clock, simulated
// clients and a shell that applies effects at once and runs §5 heartbeats as the real
// shell does (RelayPrimitives `Heartbeats`: pings, and a silent socket dropped and
// reported `closed(clean: false)`). Every step is one random action;
// invariants are checked after each (see `check`).
import RelayProtocol

@testable import RelayCore
import RelayPrimitives

final class SimWorld {
  static let users = ["u0", "u1", "u2", "u3", "u4"]
  static let sessionIds = ["s0", "s1", "s2"]

  let seed: UInt64
  var rng: SeededRandom
  let config: CoreConfig
  let core: RelayCore
  /// The shell's §5 heartbeats and each open connection's slot in them.
  var heartbeats: Heartbeats
  var slots: [UInt64: Heartbeats.Slot] = [:]
  var now = Instant(monoMs: 1_000, wallMs: 1_700_000_000_000)
  var clients: [SimClient] = []
  var byConnection: [UInt64: SimClient] = [:]
  var nextConnection: UInt64 = 1
  /// Every session event as emitted, per session (reset when a session restarts at 1).
  var log: [String: [[UInt8]]] = [:]
  /// (session, uid) currently lost → when, and the instant its grace must end by.
  var pendingLost: [ParticipantKey: (lostAt: Int64, deadline: Int64)] = [:]
  var failures: [String] = []
  var step = 0
  var action = ""

  init(seed: UInt64) {
    self.seed = seed
    rng = SeededRandom(seed: seed)
    var config = CoreConfig(devMode: true, serverVersion: "sim")
    config.heartbeatIntervalMs = 1_000
    config.heartbeatTimeoutMs = 3_000
    config.graceMs = 5_000
    config.backgroundGraceMs = 12_000
    config.idleTimeoutMs = [8_000, 30_000, 90_000][rng.below(3)]
    config.replayEvents = [4, 16, 1_000][rng.below(3)]
    config.replayAgeMs = [6_000, 300_000][rng.below(2)]
    config.handRate = 1_000
    config.messageRate = 1_000
    self.config = config
    heartbeats = Heartbeats(intervalMs: config.heartbeatIntervalMs, timeoutMs: config.heartbeatTimeoutMs)
    core = RelayCore(config: config, ids: SeededIDs(prefix: "t\(seed)-", long: seed % 2 == 1), verifyToken: { _, _ in nil })
    core.debugEventTap = { [unowned self] session, seq, payload in self.tapped(session, seq, payload) }
  }

  func fail(_ message: String) {
    failures.append("step \(step) [\(action)] t=\(now.monoMs): \(message)")
  }

  // MARK: Driving the core

  /// Applies the core's effects like the shell would, at once: deliveries, and
  /// `closed` for closes. Repeats until quiet.
  func settle() {
    while true {
      let effects = core.takeEffects()
      if effects.isEmpty { return }
      var ends: [ConnectionID] = []
      for effect in effects {
        switch effect {
        case .send(let payload, let to):
          for c in to { deliver(payload, to: c) }
        case .close(let c, _, _): ends.append(c)
        case .webhook, .push: break
        }
      }
      for c in ends { shellClosed(c, clean: true) }
    }
  }

  /// The shell's heartbeat timer fired: clients that still answer pong at once; a
  /// silent one past the timeout is dropped, which the core hears as an unclean close.
  func heartbeatsDue() {
    let due = heartbeats.due(nowMs: now.monoMs)
    for raw in due.ping {
      guard let client = byConnection[raw], client.open, !client.silent, let slot = slots[raw] else { continue }
      heartbeats.inbound(slot, nowMs: now.monoMs)
    }
    // One at a time, each close's effects applied before the next, as the server
    // applies each `closed` input's effects at once.
    for raw in due.timedOut {
      shellClosed(ConnectionID(raw), clean: false)
      settle()
    }
  }

  func shellClosed(_ c: ConnectionID, clean: Bool) {
    guard let client = byConnection[c.raw], client.open else { return }
    if !clean && client.ready { markLost(client) }
    if let slot = slots.removeValue(forKey: c.raw) { heartbeats.closed(slot) }
    core.closed(c, clean: clean, at: now)
    client.open = false
  }

  func markLost(_ client: SimClient) {
    client.lostAtMs = now.monoMs
    client.lostGraceMs = client.background ? config.backgroundGraceMs : config.graceMs
  }

  /// Moves the clock to `target`, firing the core's `tick` and the shell's heartbeats
  /// at every deadline of either on the way, earliest first.
  func advance(to target: Int64) {
    while true {
      let core = self.core.nextDeadline ?? .max
      let shell = heartbeats.nextDeadlineMs ?? .max
      guard min(core, shell) <= target else { break }
      setTime(max(min(core, shell), now.monoMs))
      if shell <= core { heartbeatsDue() } else { self.core.tick(at: now) }
      settle()
      check()
    }
    setTime(target)
  }

  func setTime(_ mono: Int64) {
    now.wallMs += mono - now.monoMs
    now.monoMs = mono
  }

  func send(_ client: SimClient, _ json: String) {
    if let slot = slots[client.c.raw] { heartbeats.inbound(slot, nowMs: now.monoMs) }
    core.receive(client.c, text: Array(json.utf8), at: now)
    settle()
  }

  // MARK: Receiving

  func deliver(_ payload: Payload, to c: ConnectionID) {
    guard let client = byConnection[c.raw] else { return fail("delivery to unknown \(c)") }
    guard client.open else { return fail("delivery to \(c) after it closed") }
    guard let message = try? JSONParser.parse(payload.bytes), let type = message["type"]?.stringValue else {
      return fail("unparsable message to \(c)")
    }
    let session = message["session"]?.stringValue ?? ""
    switch type {
    case "welcome": welcomed(client, message)
    case "session.joined": client.setView(session, SimDecode.snapshot(message))
    case "session.resumed":
      let seq = message["seq"]?.numberValue?.int64
      if client.views[session]?.seq != seq { fail("\(c) session.resumed seq \(seq ?? -1) ≠ last seen \(client.views[session]?.seq ?? -1)") }
    case "session.left", "session.timed_out": client.dropView(session)
    case _ where SimDecode.sessionEvents.contains(type): received(type, message, payload, client)
    default: break
    }
  }

  func welcomed(_ client: SimClient, _ message: JSONValue) {
    client.ready = true
    client.resumeToken = message["resumeToken"]?.stringValue
    let resumed = message["resumed"]?.boolValue ?? false
    if let expected = client.expectResumed, expected != resumed {
      fail("\(client.c) welcome.resumed \(resumed), expected \(expected)")
    }
    if !resumed {
      for id in client.sessions { client.dropView(id) }
    }
  }

  /// A session event to a member: strictly the next seq, byte-identical to what was
  /// emitted under that seq (so a replay is exactly the missed suffix), then applied.
  func received(_ type: String, _ message: JSONValue, _ payload: Payload, _ client: SimClient) {
    let session = message["session"]?.stringValue ?? ""
    let seq = message["seq"]?.numberValue?.int64 ?? -1
    guard var model = client.views[session] else {
      return fail("\(client.c) got \(type) #\(seq) for \(session) it is not in")
    }
    if seq != model.seq + 1 { fail("\(client.c) \(session): seq \(seq) after \(model.seq)") }
    if let events = log[session], seq >= 1, seq <= events.count, events[Int(seq) - 1] != payload.bytes {
      fail("\(client.c) \(session) #\(seq): bytes differ from the emitted event")
    }
    if let complaint = SimDecode.apply(type, message, to: &model) { fail("\(client.c) \(session): \(complaint)") }
    model.seq = seq
    client.views[session] = model
  }

  // MARK: The global event stream

  /// Every emitted session event: log it, and follow each (session, uid) through
  /// lost → exactly one of restored / timed_out (or idle removal, §5.5).
  func tapped(_ session: String, _ seq: Int64, _ payload: Payload) {
    if seq == 1 { log[session] = [] }
    log[session, default: []].append(payload.bytes)
    if log[session]!.count != Int(seq) { fail("\(session): emitted seq \(seq) out of order") }
    guard let event = try? JSONParser.parse(payload.bytes), let type = event["type"]?.stringValue,
      let uid = event["uid"]?.stringValue
    else { return }
    let key = ParticipantKey(session: session, uid: uid)
    switch type {
    case "participant.lost":
      if pendingLost[key] != nil { fail("\(uid) lost twice in \(session)") }
      pendingLost[key] = (now.monoMs, now.monoMs + graceOfMember(uid, session))
    case "participant.restored", "participant.timed_out":
      guard let pending = pendingLost.removeValue(forKey: key) else {
        return fail("\(type) of \(uid) in \(session) without participant.lost")
      }
      if type == "participant.timed_out", now.monoMs < pending.lostAt + config.graceMs {
        fail("\(uid) timed out in \(session) before its grace")
      }
    case "participant.left":
      if pendingLost.removeValue(forKey: key) != nil, event["reason"]?.stringValue != "idle" {
        fail("lost \(uid) left \(session) other than by idle timeout")
      }
    default: break
    }
  }

  /// The grace of the connection that is the member for (uid, session) right now.
  func graceOfMember(_ uid: String, _ session: String) -> Int64 {
    let member = clients.last { $0.uid == uid && $0.views[session] != nil && $0.ready && $0.open }
    return member?.background == false ? config.graceMs : config.backgroundGraceMs
  }
}
