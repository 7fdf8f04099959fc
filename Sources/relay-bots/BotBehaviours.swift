// What a bot does when the engine picks it for a behaviour: hands, messages,
// leave/rejoin churn, and the three ways to drop off (vanish, abrupt close,
// background) followed by a resume.

import EventLoop

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
      guard recentMessageMs.count < 19 else { return false }
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
    conn?.goSilent()
    phase = .silent
    ctx.stats.ready -= 1
    scheduleResume(after: b)
    return true
  }

  /// TCP reset without a close frame: lost at once (§5).
  func dropAbruptly(after b: Behaviour) -> Bool {
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

  /// Reconnects with `resume` (§8); a silent old connection stays open until
  /// the new one is welcomed (the relay replaces it, close 4509).
  func resumeNow() {
    if let old = conn {
      old.detach()
      previousConn = old
    }
    busy = false
    // Commands sent on the old connection will never be answered.
    pending.removeAll()
    connect(resume: true)
  }
}
