// What a bot does when the engine picks it for a behaviour: hands, messages,
// leave/rejoin churn, and the three ways to drop off (vanish, abrupt close,
// background) followed by a resume.

import EventLoop
import RelayClientCore
import RelayPrimitives
import RelayProtocol

extension Bot {
  // MARK: hands (§7)

  /// §7 rate limit is 10 raise/lower per 10 000 ms; bots stay at 9 so a
  /// `rate_limited` reply is always a relay bug, never bot load.
  private func underHandLimit(nowMs: UInt64) -> Bool {
    recentHandMs.removeAll { $0 + 10_000 <= nowMs }
    return recentHandMs.count < 9
  }

  func toggleHand() -> Bool {
    let now = ctx.nowMs
    guard underHandLimit(nowMs: now) else { return false }
    recentHandMs.append(now)
    ctx.stats.handCommands += 1
    ctx.handSentNs[session + "|" + uid] = Loop.hrtimeNs()
    let up = view.hands.contains(uid)
    send(up ? .lowerHand(session: session, uid: nil) : .raiseHand(session: session), kind: .hand)
    return true
  }

  /// A host lowers the first hand in the queue, or all hands when many are up.
  func hostLower() -> Bool {
    guard isHost, let first = view.hands.ordered.first(where: { $0 != uid }) else { return false }
    let now = ctx.nowMs
    guard underHandLimit(nowMs: now) else { return false }
    recentHandMs.append(now)
    ctx.stats.handCommands += 1
    if view.hands.count > 5 {
      send(.lowerAllHands(session: session), kind: .hostLower)
      return true
    }
    ctx.handSentNs[session + "|" + first] = Loop.hrtimeNs()
    send(.lowerHand(session: session, uid: first), kind: .hostLower)
    return true
  }

  // MARK: messages (§7a)

  /// `data` carries the send instant (`t`, hrtime ns) and a run-unique
  /// counter (`n`), padded with `p` up to the scenario's payload size.
  private func payload() -> JSONValue {
    let (t, n, pad) = payloadFields()
    var members: [(key: String, value: JSONValue)] = [("t", .number(JSONNumber(t))), ("n", .number(JSONNumber(n)))]
    if let pad { members.append(("p", .string(pad))) }
    return .object(JSONObject(members))
  }

  /// The same `data` written straight into a broadcast frame: the broadcast
  /// wire has no client machine to hand a value to, and its fan-out rows are
  /// bound by the bots' core (Benchmarks/results/bots-client-machine.md).
  private func writePayload(_ w: inout JSONWriter) {
    let (t, n, pad) = payloadFields()
    w.beginObject()
    w.field("t", t)
    w.field("n", n)
    if let pad { w.field("p", pad) }
    w.endObject()
  }

  private func payloadFields() -> (t: Int64, n: Int64, pad: String?) {
    let t = Int64(truncatingIfNeeded: Loop.hrtimeNs())
    let n = Int64(truncatingIfNeeded: ctx.nextMessageNumber())
    // `{"t":` + t + `,"n":` + n + `}` is 11 bytes beside the digits; `,"p":""` 7 more.
    let pad = ctx.scenario.payloadBytes - (11 + Self.digitCount(t) + Self.digitCount(n)) - 7
    return (t, n, pad > 0 ? String(repeating: "x", count: pad) : nil)
  }

  private static func digitCount(_ v: Int64) -> Int {
    var count = 1
    var rest = v / 10
    while rest > 0 {
      count += 1
      rest /= 10
    }
    return count
  }

  /// §7a rate limit (20 per 1 000 ms by default); fixed-rate scenarios spread
  /// their load so bots never reach it.
  func sendMessage(respectRateLimit: Bool = true) -> Bool {
    if respectRateLimit {
      let now = ctx.nowMs
      recentMessageMs.removeAll { $0 + 1_000 <= now }
      guard recentMessageMs.count < ctx.scenario.messagesPerBotPerSecond else { return false }
      recentMessageMs.append(now)
    }
    ctx.stats.messagesSent += 1
    switch ctx.options.wire {
    case .relay:
      send(.sendMessage(session: session, data: payload()), kind: .message)
    case .broadcast:
      var w = JSONWriter(capacity: 96)
      w.beginObject()
      w.field("from", uid)
      w.key("data")
      writePayload(&w)
      w.endObject()
      ctx.broadcastExpected += engine.readyMembers(of: session)
      sendText(w.bytes)
    }
    return true
  }

  /// Publisher mode: keep `inflight` own messages travelling (sent, not yet
  /// received back), so throughput is bound by the server, not a timer.
  func publish() {
    guard isActive else { return }
    inflight += 1
    _ = sendMessage(respectRateLimit: false)
  }

  /// `client.background` (§5), through the machine (which re-sends it after a
  /// reconnect while it is on).
  func sendBackground(_ on: Bool) {
    perform(machine.setBackground(on, nowMs: machineNowMs))
  }

  // MARK: churn (§6)

  func leaveForAWhile(afterMs: Int) -> Bool {
    leftOnPurpose = true
    busy = true
    send(.leaveSession(session), kind: .leave)
    engine.schedule(afterMs: afterMs) { [unowned self] in
      self.leftOnPurpose = false
      self.busy = false
      if self.phase == .ready { self.sendJoin() }
    }
    return true
  }

  // MARK: dropping off and resuming (§5, §8)

  /// Stops reading: the relay sees no pong and declares the bot lost after
  /// its heartbeat timeout.
  func vanish(after b: Behaviour) -> Bool {
    lostSinceMs = conn?.quietSince(nowMs: ctx.nowMs) ?? ctx.nowMs
    conn?.goSilent()
    phase = .silent
    ctx.stats.ready -= 1
    transportGone("vanished")
    scheduleResume(after: b)
    return true
  }

  /// TCP reset without a close frame: lost at once (§5).
  func dropAbruptly(after b: Behaviour) -> Bool {
    lostSinceMs = conn?.quietSince(nowMs: ctx.nowMs) ?? ctx.nowMs
    conn?.abandon()
    conn = nil
    pending.removeAll()
    phase = .offline
    ctx.stats.ready -= 1
    transportGone("dropped")
    scheduleResume(after: b)
    return true
  }

  /// Announces background (longer grace, §5), then vanishes.
  func goBackground(after b: Behaviour) -> Bool {
    background = true
    sendBackground(true)
    return vanish(after: b)
  }

  /// The bot let its connection go on purpose: to the machine the transport
  /// ended without a close frame, so it holds its state for the resume (§8).
  /// The bot times that resume itself (`scheduleResume`), not the machine.
  private func transportGone(_ why: String) {
    perform(machine.transportClosed(code: nil, reason: why, nowMs: machineNowMs))
  }

  private func scheduleResume(after b: Behaviour) {
    busy = true
    let grace = background ? ctx.scenario.backgroundGraceMs : ctx.scenario.graceMs
    let delay = b.afterGrace ? grace + ctx.heartbeatTimeoutMs + 2_000 : b.afterMs
    engine.schedule(afterMs: delay) { [unowned self] in
      self.expectResumed = !b.afterGrace
      self.resumeNow()
    }
  }

  /// Reconnects with `resume` (§8) on the next `--url`, so with several nodes
  /// a resume crosses nodes (§12: a token issued by any node works on any);
  /// a silent old connection stays open until the new one is welcomed (the
  /// relay replaces it, close 4509).
  func resumeNow() {
    // Closed at the end of the run (or lost) while the resume was pending.
    guard phase != .done else { return }
    if let old = conn {
      old.detach()
      previousConn = old
      conn = nil
    }
    busy = false
    // Commands sent on the old connection will never be answered.
    pending.removeAll()
    urlIndex = (urlIndex + 1) % ctx.options.urls.count
    // Back in the foreground: said after the welcome (`welcomed`), not re-sent
    // by the machine as still on.
    if background { perform(machine.setBackground(false, nowMs: machineNowMs)) }
    // No token yet (dropped before the first welcome): a plain hello.
    resuming = machine.currentResumeToken != nil
    perform(machine.reconnectNow(nowMs: machineNowMs))
    if conn == nil {
      checker.fail(.connection, "\(uid): no reconnect attempt (client \(machine.connectionState.rawValue))")
      view.closeInterval()
      engine.botLost(self)
    }
  }

  // MARK: drops the relay caused (§2 close codes, §12)

  /// Consecutive attempts without a welcome before the bot gives up: with the
  /// machine's backoff at the bots' scale (Bot.swift), about 15 s on average,
  /// several times round any URL list.
  static let maxDropRetries = 12

  /// The relay dropped this bot (or refused it) and the machine chose to
  /// reconnect (§2 close codes: 1001 a drained node, 1011, 1012 a node that
  /// rejoins or a Redis that lost its data (§12), 4000–4499, or TCP ending
  /// without a close handshake): back on the next URL when the machine's
  /// backoff says, resuming when it holds a token (§8).
  func reconnectAfterDrop(_ end: ConnectionEnd, was: Phase, quietSinceMs: UInt64) {
    let why = "code \(end.code.map(String.init) ?? "none"), \(end.reason)"
    guard machine.attempt <= Self.maxDropRetries else {
      checker.fail(.connection, "\(uid): gave up after \(machine.attempt - 1) reconnects (last: \(why))")
      view.closeInterval()
      engine.botLost(self)
      return
    }
    stats.reconnects += 1
    checker.pass(.connection)
    if end.code == 1012 { ctx.lastRestartCloseMs = ctx.nowMs }
    if was == .ready {
      // Back within grace, the relay still holds the user and must resume it
      // (§8). After 1011 or 1012 the shared state may have been reset (§12):
      // a fresh join is as right as a resume then. A relay that stalled
      // before the drop (a paused node) may have started grace back then.
      expectResumed = end.code != 1011 && end.code != 1012
      lostSinceMs = quietSinceMs
    }
    // (Dropped while connecting: a retry of that connect keeps its expectation.)
    busy = true
    let delay = max(0, (machine.reconnectAtMs ?? machineNowMs) - machineNowMs)
    engine.schedule(afterMs: Int(delay)) { [unowned self] in
      guard self.phase == .offline else { return }
      self.resumeNow()
    }
  }
}
