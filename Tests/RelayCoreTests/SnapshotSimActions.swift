// Random inputs of SnapshotTests' driver (SnapshotSim.swift).
import RelayProtocol

@testable import RelayCore

extension TwinSim {
  var readyConnections: [UInt64] { open.filter { uidOf[$0] != nil }.sorted() }

  /// Runs `steps` random inputs; the twin is restored from the primary at `restoreAt`
  /// and then, now and again, from its own snapshot.
  func run(steps: Int, restoreAt: Int) {
    while step < steps && failures.isEmpty {
      step += 1
      if step == restoreAt || (twin != nil && rng.chance(3)) { restoreTwin() }
      randomInput()
      if let twin, rng.chance(20) {
        if twin.snapshot() != primary.snapshot() { fail("snapshots differ") }
        // Derived figures too: replay bytes, finished calls held (not in the bytes).
        if twin.stats != primary.stats || twin.callStats != primary.callStats { fail("stats differ") }
      }
    }
    if let twin, failures.isEmpty, twin.snapshot() != primary.snapshot() { fail("final snapshots differ") }
  }

  func randomInput() {
    // A replica ticks the core at every log entry (docs/cluster.md, "Ticks").
    apply { $0.tick(at: self.now); return [] }
    switch rng.below(100) {
    case 0..<9: connect(hello: true)
    case 9..<11: connect(hello: false)
    case 11..<22: command { c in self.join(self.pickSession()) }
    case 22..<26: command { c in self.sessionCommand("session.leave", c) }
    case 26..<32: command { c in self.sessionCommand("hand.raise", c) }
    case 32..<36: command { c in self.lower(c) }
    case 36..<38: command { c in self.sessionCommand("hand.lower_all", c) }
    case 38..<44: command { c in self.message(c) }
    case 44..<46: command { c in self.remove(c) }
    case 46..<48: command { _ in #"{"type":"client.background","id":"b","background":\#(self.rng.chance(50))}"# }
    case 48..<50: command { _ in self.rng.chance(50) ? "garbage" : #"{"type":"bogus","id":"x"}"# }
    case 50..<55: command { c in self.initiate(c) }
    case 55..<63: command { _ in self.answer() }
    case 63..<66: httpCallAction()
    case 66..<68: admin()
    case 68..<73: if let c = rng.pick(open.sorted()) { close(c, clean: false) }
    case 73..<77: if let c = rng.pick(open.sorted()) { close(c, clean: true) }
    case 77..<79: if let c = rng.pick(open.sorted()) { silent.insert(c) }
    case 79..<83: burst()
    case 83..<86: command { _ in self.pushCommand() }
    default: advance()
    }
  }

  // MARK: Connections

  /// A new connection on one of three nodes (the node number in the top bits, as in
  /// the cluster), saying hello or not; often a resume of an earlier token of the user.
  func connect(hello: Bool) {
    let raw = UInt64(1 + rng.below(3)) << 40 | nextConnection
    nextConnection += 1
    open.insert(raw)
    slots[raw] = heartbeats.opened(raw, nowMs: now.monoMs)
    apply { $0.open(ConnectionID(raw), at: self.now); return [] }
    guard hello, let uid = rng.pick(Self.users) else { return }
    let role = rng.chance(30) ? "host" : "participant"
    uidOf[raw] = uid
    var json = config.devMode
      ? #"{"type":"hello","id":"h","dev":{"uid":"\#(uid)","name":"\#(uid.uppercased())","role":"\#(role)"}"#
      : #"{"type":"hello","id":"h","token":"\#(rng.chance(95) ? uid : "nobody").\#(role)""#
    if rng.chance(50), let old = rng.pick(tokens.filter { $0.uid == uid }) {
      let seen = (seqs[old.c] ?? [:]).sorted { $0.key < $1.key }
      let listed = seen.filter { _ in rng.chance(85) }.map { #""\#($0.key)":\#(max(0, $0.value - Int64(rng.below(3))))"# }
      json += #","resume":{"token":"\#(old.token)","sessions":{\#(listed.joined(separator: ","))}}"#
      seqs[raw] = seqs[old.c]
    }
    if rng.chance(60) { json += #","device":"d\#(rng.below(3))""# }
    send(raw, json + "}")
  }

  /// §9a registrations on three devices (without `device` the hello's applies), now
  /// and then an unregister: the registry, and the pushes it drives, are in the twin's
  /// state too.
  func pushCommand() -> String {
    let kind = rng.pick(["apns-voip", "apns", "fcm"]) ?? "fcm"
    let token = kind == "fcm" ? "f\(rng.below(5))" : String(repeating: "\(rng.below(5))", count: 64)
    if rng.chance(20) { return #"{"type":"push.unregister","id":"p","token":"\#(token)"}"# }
    let device = rng.chance(70) ? #","device":"d\#(rng.below(3))""# : ""
    return #"{"type":"push.register","id":"p","token":"\#(token)","kind":"\#(kind)"\#(device)}"#
  }

  /// Several commands of one connection at one instant: the §6, §7 and §7a rate
  /// windows fill up and refuse.
  func burst() {
    guard let c = rng.pick(readyConnections) else { return }
    let session = ownSession(c)
    for _ in 0..<(3 + rng.below(4)) {
      switch rng.below(4) {
      case 0: send(c, #"{"type":"hand.raise","session":"\#(session)"}"#)
      case 1: send(c, #"{"type":"hand.lower","session":"\#(session)"}"#)
      case 2: send(c, #"{"type":"message.send","session":"\#(session)","data":\#(step)}"#)
      default: send(c, rng.chance(50) ? join(session) : #"{"type":"session.leave","session":"\#(session)"}"#)
      }
    }
  }

  func send(_ c: UInt64, _ json: String) {
    if let slot = slots[c] { heartbeats.inbound(slot, nowMs: now.monoMs) }
    apply { $0.receive(ConnectionID(c), text: Array(json.utf8), at: self.now); return [] }
  }

  /// A command from a random connection that said hello (now and then from one that
  /// did not, or is silent: its commands still arrive).
  func command(_ make: (UInt64) -> String) {
    let pool = rng.chance(95) ? readyConnections : open.sorted()
    guard let c = rng.pick(pool) else { return }
    send(c, make(c))
  }

  // MARK: Commands

  func pickSession() -> String { rng.pick(sessionIds) ?? "s0" }

  /// A session the connection is in, mostly; any session otherwise.
  func ownSession(_ c: UInt64) -> String {
    rng.chance(85) ? (rng.pick((seqs[c] ?? [:]).keys.sorted()) ?? pickSession()) : pickSession()
  }

  func maybeId() -> String { rng.chance(70) ? #","id":"r\#(step)""# : "" }

  func join(_ session: String) -> String { #"{"type":"session.join","session":"\#(session)"\#(maybeId())}"# }

  func sessionCommand(_ type: String, _ c: UInt64) -> String {
    #"{"type":"\#(type)","session":"\#(ownSession(c))"\#(maybeId())}"#
  }

  func lower(_ c: UInt64) -> String {
    let target = rng.chance(40) ? #","uid":"\#(rng.pick(Self.users) ?? "u0")""# : ""
    return #"{"type":"hand.lower","session":"\#(ownSession(c))"\#(target)\#(maybeId())}"#
  }

  func message(_ c: UInt64) -> String {
    #"{"type":"message.send","session":"\#(ownSession(c))","data":{"n":\#(step),"s":"é\u00e9"}\#(maybeId())}"#
  }

  func remove(_ c: UInt64) -> String {
    #"{"type":"participant.remove","session":"\#(ownSession(c))","uid":"\#(rng.pick(Self.users) ?? "u0")"\#(maybeId())}"#
  }

  func initiate(_ c: UInt64) -> String {
    let to = Self.users.filter { $0 != uidOf[c] || rng.chance(5) }.filter { _ in rng.chance(40) }
    let list = (to.isEmpty ? ["u0"] : to).map { #""\#($0)""# }.joined(separator: ",")
    let metadata = rng.chance(50) ? #","metadata":{"step":\#(step)}"# : ""
    let type = rng.chance(50) ? "audio" : "video"
    return #"{"type":"call.initiate","id":"i\#(step)","to":[\#(list)],"callType":"\#(type)"\#(metadata)}"#
  }

  func answer() -> String {
    let call = rng.pick(callIds) ?? "nocall"
    let verb = rng.pick(["call.accept", "call.accept", "call.reject", "call.cancel", "call.end"]) ?? "call.end"
    let reason = verb == "call.reject" && rng.chance(50) ? #","reason":"busy""# : ""
    return #"{"type":"\#(verb)","callId":"\#(call)"\#(reason)\#(maybeId())}"#
  }

  // MARK: HTTP and admin

  /// `POST /v1/calls/{id}/…` by a random user, and the read-only call and session
  /// views (their answers are compared too).
  func httpCallAction() {
    let call = rng.pick(callIds) ?? "nocall"
    let uid = rng.pick(Self.users) ?? "u0"
    let action = rng.pick([CallAction.accept, .reject(.declined), .reject(.busy), .cancel]) ?? .cancel
    let identity = Identity(uid: uid, name: uid.uppercased())
    apply { core in
      let result = core.callAction(action, callId: call, identity: identity, at: self.now)
      let info = core.callInfo(callId: call, uid: uid) ?? []
      return [UInt8(result.status & 0xFF)] + result.body + info
    }
  }

  func admin() {
    if rng.chance(40) {
      apply { core in
        let id = core.createSession(at: self.now)
        return Array(id.utf8)
      }
      // The id is the same on both cores (compared above).
      if let id = primary.sessions.keys.sorted().last(where: { !sessionIds.contains($0) }) { sessionIds.append(id) }
      return
    }
    let session = pickSession()
    let uid = rng.pick(Self.users) ?? "u0"
    apply { core in
      let removed = core.removeParticipant(session: session, uid: uid, at: self.now)
      return [removed ? 1 : 0] + (core.sessionInfo(session) ?? [])
    }
  }

  // MARK: Time

  /// Advances the clock: short steps mostly, past grace, idle and ring timeouts
  /// sometimes, past finished calls' retention rarely. Either through every deadline
  /// on the way (the ticker's own ticks) or in one jump (a late entry).
  func advance() {
    let ms = Int64(rng.chance(80) ? rng.below(3_000) : rng.chance(90) ? rng.below(20_000) : rng.below(400_000))
    let target = now.monoMs + ms
    if rng.chance(50) {
      while true {
        let next = primary.nextDeadline ?? .max
        let shell = heartbeats.nextDeadlineMs ?? .max
        guard min(next, shell) <= target else { break }
        setTime(max(min(next, shell), now.monoMs))
        if shell <= next {
          heartbeatsDue()
          continue
        }
        if let twin, twin.nextDeadline != next { fail("next deadlines differ") }
        apply { $0.tick(at: self.now); return [] }
      }
    }
    setTime(target)
    heartbeatsDue()
    apply { $0.tick(at: self.now); return [] }
  }

  func setTime(_ mono: Int64) {
    now.wallMs += mono - now.monoMs
    now.monoMs = mono
  }
}
