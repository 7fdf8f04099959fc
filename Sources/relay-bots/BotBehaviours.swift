// What a bot does when the engine picks it for a behaviour: hands, messages,
// leave/rejoin churn, and the three ways to drop off (vanish, abrupt close,
// background) followed by a resume.

import EventLoop
import RelayPrimitives

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
    send({ w in w.raw(",\"session\":"); w.string(session) }, type: up ? "hand.lower" : "hand.raise", kind: .hand)
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
      send({ w in w.raw(",\"session\":"); w.string(session) }, type: "hand.lower_all", kind: .hostLower)
      return true
    }
    ctx.handSentNs[session + "|" + first] = Loop.hrtimeNs()
    send(
      { w in
        w.raw(",\"session\":")
        w.string(session)
        w.raw(",\"uid\":")
        w.string(first)
      }, type: "hand.lower", kind: .hostLower)
    return true
  }

  // MARK: messages (§7a)

  /// `data` carries the send instant (`t`, hrtime ns) and a run-unique
  /// counter (`n`), padded with `p` up to the scenario's payload size.
  private func payload(_ w: inout JsonWriter) {
    let start = w.bytes.count
    w.raw("{\"t\":")
    w.uint(Loop.hrtimeNs())
    w.raw(",\"n\":")
    w.uint(ctx.nextMessageNumber())
    let pad = ctx.scenario.payloadBytes - (w.bytes.count - start) - 8
    if pad > 0 {
      w.raw(",\"p\":\"")
      w.bytes.append(contentsOf: repeatElement(UInt8(ascii: "x"), count: pad))
      w.raw("\"")
    }
    w.raw("}")
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
      send(
        { w in
          w.raw(",\"session\":")
          w.string(session)
          w.raw(",\"data\":")
          payload(&w)
        }, type: "message.send", kind: .message)
    case .broadcast:
      var w = JsonWriter(capacity: 96)
      w.raw("{\"from\":")
      w.string(uid)
      w.raw(",\"data\":")
      payload(&w)
      w.raw("}")
      ctx.broadcastExpected += engine.readyMembers(of: session)
      ctx.stats.commandsSent += 1
      conn?.sendText(w.bytes)
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

  func sendBackground(_ on: Bool) {
    send({ w in w.raw(on ? ",\"background\":true" : ",\"background\":false") }, type: "client.background", kind: .background)
  }

  // MARK: churn (§6)

  func leaveForAWhile(afterMs: Int) -> Bool {
    leftOnPurpose = true
    busy = true
    send({ w in w.raw(",\"session\":"); w.string(session) }, type: "session.leave", kind: .leave)
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
    scheduleResume(after: b)
    return true
  }

  /// Announces background (longer grace, §5), then vanishes.
  func goBackground(after b: Behaviour) -> Bool {
    background = true
    sendBackground(true)
    return vanish(after: b)
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
    if let old = conn {
      old.detach()
      previousConn = old
    }
    busy = false
    // Commands sent on the old connection will never be answered.
    pending.removeAll()
    urlIndex = (urlIndex + 1) % ctx.options.urls.count
    // No token yet (dropped before the first welcome): a plain hello.
    connect(resume: resumeToken != nil)
  }

  // MARK: drops the relay caused (§2 close codes, §12)

  /// Close codes that mean "reconnect, with resume" (§2): 1001 going away (a
  /// drained node), 1011 internal error, 1012 (§12: a node that rejoins the
  /// cluster, or a Redis that lost its data), 4000–4499; nil is a TCP end
  /// without a close handshake (1006: a killed node) or a refused connect or
  /// upgrade (a dead or draining node), which the next URL may serve.
  static func meansReconnect(_ code: UInt16?) -> Bool {
    guard let code else { return true }
    return code == 1001 || code == 1011 || code == 1012 || (4000..<4500).contains(code)
  }

  /// Consecutive reconnects without a welcome before the bot gives up: with
  /// the backoff below, about 15 s, several times round any URL list.
  static let maxDropRetries = 12

  /// The relay dropped this bot (or refused it): back on the next URL after a
  /// short, growing backoff, resuming when it holds a token (§8).
  func reconnectAfterDrop(_ end: ConnectionEnd, was: Phase, quietSinceMs: UInt64) {
    // A vanished bot already has its resume scheduled; that one takes over.
    guard was != .silent else { return }
    let why = "code \(end.code.map(String.init) ?? "none"), \(end.reason)"
    dropRetries += 1
    guard dropRetries <= Self.maxDropRetries else {
      checker.fail(.connection, "\(uid): gave up after \(dropRetries - 1) reconnects (last: \(why))")
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
    let delay = min(2_000, 100 << min(dropRetries - 1, 5)) + ctx.random.below(100)
    engine.schedule(afterMs: delay) { [unowned self] in
      guard self.phase == .offline else { return }
      self.resumeNow()
    }
  }
}
