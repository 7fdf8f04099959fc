// Random actions and the invariants checked after every one (SimulationTests).
import RelayProtocol

@testable import RelayCore

extension SimWorld {
  var openClients: [SimClient] { clients.filter { $0.open } }
  var readyClients: [SimClient] { clients.filter { $0.open && $0.ready } }

  /// One random step.
  func randomAction() {
    step += 1
    let roll = rng.below(100)
    switch roll {
    case 0..<10: connect()
    case 10..<22: command("join") { c in SimWorld.sessionIds[self.rng.below(3)] }
    case 22..<28: command("leave") { c in self.rng.pick(c.sessions) }
    case 28..<38: command("raise") { c in self.rng.pick(c.sessions) }
    case 38..<46: command("lower") { c in self.rng.pick(c.sessions) }
    case 46..<54: command("message") { c in self.rng.pick(c.sessions) }
    case 54..<58: command("background") { _ in "" }
    case 58..<62: vanish()
    case 62..<67: closeAbruptly()
    case 67..<71: closeCleanly()
    default: advanceRandomly()
    }
    check()
  }

  /// A new connection of a random user: a fresh hello, or (often) a resume of an
  /// earlier connection of that user with the seqs it saw.
  func connect() {
    guard openClients.count < 9, let uid = rng.pick(SimWorld.users) else { return }
    let c = ConnectionID(nextConnection)
    nextConnection += 1
    let client = SimClient(c: c, uid: uid)
    clients.append(client)
    byConnection[c.raw] = client
    slots[c.raw] = heartbeats.opened(c.raw, nowMs: now.monoMs)
    core.open(c, at: now)
    settle()
    if rng.chance(10) { return action = "open \(c) \(uid) (no hello yet)" }
    let candidates = clients.filter { $0.uid == uid && $0 !== client && $0.resumeToken != nil && !$0.spent }
    var hello = #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid)"}"#
    if rng.chance(60), let old = rng.pick(candidates), let token = old.resumeToken {
      let listed = old.sessions.filter { _ in rng.chance(85) }
      let sessions = listed.map { #""\#($0)":\#(old.views[$0]!.seq)"# }.joined(separator: ",")
      hello += #","resume":{"token":"\#(token)","sessions":{\#(sessions)}}"#
      client.expectResumed = expectsResume(old)
      if client.expectResumed == true { old.spent = true }
      for id in listed { client.setView(id, old.views[id]!) }
      action = "resume \(c) \(uid) from \(old.c) [\(sessions)]"
    } else {
      action = "hello \(c) \(uid)"
    }
    send(client, hello + "}")
  }

  /// §8: resumable iff the token is unspent and its connection is open, or lost
  /// within grace.
  func expectsResume(_ old: SimClient) -> Bool {
    if old.open && old.ready { return true }
    guard let lostAt = old.lostAtMs else { return false }
    return now.monoMs < lostAt + old.lostGraceMs
  }

  /// A command by a random ready, non-silent client; `target` picks the session.
  func command(_ kind: String, _ target: (SimClient) -> String?) {
    guard let client = rng.pick(readyClients.filter { !$0.silent }), let session = target(client) else { return }
    action = "\(kind) \(client.c) \(client.uid) \(session)"
    switch kind {
    case "join": send(client, #"{"type":"session.join","session":"\#(session)"}"#)
    case "leave": send(client, #"{"type":"session.leave","session":"\#(session)"}"#)
    case "raise": send(client, #"{"type":"hand.raise","session":"\#(session)"}"#)
    case "lower": send(client, #"{"type":"hand.lower","session":"\#(session)"}"#)
    case "message": send(client, #"{"type":"message.send","session":"\#(session)","data":\#(step)}"#)
    default:
      client.background.toggle()
      action = "background \(client.background) \(client.c)"
      send(client, #"{"type":"client.background","background":\#(client.background)}"#)
    }
  }

  /// Half-open: the client stops sending anything, pongs included.
  func vanish() {
    guard let client = rng.pick(openClients.filter { !$0.silent }) else { return }
    action = "vanish \(client.c)"
    client.silent = true
    client.silentSinceMs = now.monoMs
  }

  func closeAbruptly() {
    guard let client = rng.pick(openClients) else { return }
    action = "abrupt close \(client.c)"
    shellClosed(client.c, clean: false)
    settle()
  }

  func closeCleanly() {
    guard let client = rng.pick(openClients.filter { !$0.silent }) else { return }
    action = "clean close \(client.c)"
    shellClosed(client.c, clean: true)
    settle()
  }

  func advanceRandomly() {
    let ms = Int64(rng.chance(85) ? rng.below(2_500) : rng.below(15_000))
    action = "advance \(ms)"
    advance(to: now.monoMs + ms)
  }

  // MARK: Invariants

  /// After every step: nobody stays lost past grace; a silent connection is lost
  /// within the heartbeat timeout; every member's rebuilt view equals the core's
  /// state, and the core's members are exactly the clients that think so.
  func check() {
    for (key, pending) in pendingLost where now.monoMs > pending.deadline {
      fail("\(key.uid) still lost in \(key.session) \(now.monoMs - pending.lostAt) ms after loss")
    }
    for client in clients where client.open && client.silent {
      // Checks run on a coarse quantum (batching pings), so allow one quantum late.
      if now.monoMs > client.silentSinceMs + config.heartbeatTimeoutMs + heartbeats.quantumMs {
        fail("\(client.c) silent since \(client.silentSinceMs) but not dropped")
      }
    }
    for client in readyClients {
      for id in client.sessions {
        guard let view = core.debugSnapshot(session: id) else {
          fail("\(client.c) thinks it is in \(id), which does not exist")
          continue
        }
        if view.model != client.views[id] {
          fail("\(client.c) view of \(id) \(String(describing: client.views[id])) ≠ core \(view.model)")
        }
        if !view.participants.contains(where: { $0.uid == client.uid && $0.connection == client.c }) {
          fail("\(client.c) thinks it is the member for \(client.uid) in \(id); core disagrees")
        }
      }
    }
    for id in core.debugSessionIds {
      for p in core.debugSnapshot(session: id)?.participants ?? [] {
        if p.status == "lost" && pendingLost[ParticipantKey(session: id, uid: p.uid)] == nil {
          fail("\(p.uid) lost in \(id) without a participant.lost event")
        }
        guard let c = p.connection else { continue }
        guard let client = byConnection[c.raw], client.open, client.views[id] != nil else {
          fail("core has \(c) as member for \(p.uid) in \(id); that client does not know")
          continue
        }
      }
    }
  }

  /// Runs `steps` random steps, then lets every grace and idle timeout run out.
  func run(steps: Int) {
    while step < steps && failures.isEmpty { randomAction() }
    guard failures.isEmpty else { return }
    action = "drain"
    advance(to: now.monoMs + config.backgroundGraceMs + config.heartbeatTimeoutMs + 1_000)
    check()
    if !pendingLost.isEmpty { fail("still lost at the end: \(pendingLost.keys.map(\.uid))") }
  }
}
