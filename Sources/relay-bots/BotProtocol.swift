// How a bot reacts to replies and personal events of the relay protocol
// (PROTOCOL.md §2, §4, §6, §8), and to messages of either protocol.

import EventLoop
import RelayClientCore
import RelayProtocol

extension Bot {
  // MARK: replies

  /// The machine matched a reply to a command (§2), or failed the command
  /// because its connection went first.
  func replied(_ requestID: UInt64, _ result: CommandReply) {
    let code: String
    let message: String
    switch result {
    case .success: (code, message) = ("", "")
    case .failure(.server(let c, let m)): (code, message) = (c.rawValue, m)
    case .failure: pending.removeValue(forKey: requestID); return  // never answered: not a reply
    }
    repliesMatched += 1
    guard let p = pending.removeValue(forKey: requestID) else { return }
    ctx.stats.reply.record(ns: Loop.hrtimeNs() &- p.sentNs)
    switch result {
    case .success(let ok): succeeded(p.kind, ok)
    case .failure: failed(p.kind, code: code, message: message)
    }
  }

  private func succeeded(_ kind: CommandKind, _ ok: JSONObject) {
    switch kind {
    case .message: ctx.stats.messagesAcked += 1
    case .callInitiate(let callees):
      guard let callId = ok["callId"]?.stringValue else { return }
      ctx.calls.started(callId: callId, caller: uid, callees: callees)
      callPlaced(callId)
    case .callCancel(let callId): ctx.calls.cancelledByCaller(callId: callId)
    case .callReject(let callId, let reason):
      _ = reason  // declined and busy are both "rejected" for the caller (§9)
      ctx.calls.calleeOutcome(callId: callId, callee: uid, "rejected", checker: ctx.checker)
    default: break
    }
  }

  private func failed(_ kind: CommandKind, code: String, message: String) {
    switch kind {
    case .callInitiate, .callAccept, .callReject, .callCancel, .callEnd:
      // Ringing not built: `unknown_type` per §2, or the relay's interim
      // `internal` "not available" answer. Skip calls, do not fail the run.
      if code == "unknown_type" || (code == "internal" && message.contains("not available")) {
        ctx.disableRinging()
        return
      }
      // §9: racing a terminal state is answered `conflict`; calls that ended
      // meanwhile are `not_found`. Both are normal under a ringing storm.
      if code == "conflict" || code == "not_found" { ctx.checker.pass(.unexpectedError); return }
    case .message:
      if code == "rate_limited" { inflight = max(0, inflight - 1) }
    default: break
    }
    ctx.unexpectedError(code: code, command: kind.name, uid: uid, message: message)
  }

  // MARK: lifecycle events

  func welcomed(_ ev: JSONValue) {
    ctx.stats.reply.record(ns: Loop.hrtimeNs() &- helloSentNs)
    phase = .ready
    ctx.stats.ready += 1
    previousConn?.abandon()
    previousConn = nil
    if let hb = ev["heartbeat"]?["timeout"]?.int { ctx.heartbeatTimeoutMs = hb }
    if let hb = ev["heartbeat"]?["interval"]?.int, hb > 0 { ctx.heartbeatIntervalMs = hb }
    let resumed = ev["resumed"]?.boolValue ?? false
    if resuming {
      ctx.stats.resumes += 1
      if resumed { ctx.stats.resumedTrue += 1 }
      if expectResumed {
        let graceMs = UInt64(background ? ctx.scenario.backgroundGraceMs : ctx.scenario.graceMs)
        // Half a second of margin for the relay's own timers.
        if let t = ctx.lastRestartCloseMs, t + 500 >= lostSinceMs, !resumed {
          ctx.checker.note("a resume after a 1012 (possible reset, §12) answered resumed:false: not checked")
        } else if ctx.nowMs + 500 < lostSinceMs + graceMs {
          ctx.checker.expect(
            resumed, .resume, "\(uid): resume within grace answered resumed:false (\(ctx.nowMs - lostSinceMs) ms after the drop)")
        } else {
          ctx.checker.note("a resume welcomed about grace after the drop was not checked for resumed:true")
        }
      }
    }
    if background {
      background = false
      sendBackground(false)
    }
    if resuming && resumed && view.member { return }  // replay, then session.resumed/joined follows
    if view.member { view.closeInterval() }
    if resuming { ctx.stats.freshRejoins += 1 }
    // After `resumed: false` the machine joins again the sessions it held (§8);
    // a bot that was no member yet joins now.
    if !leftOnPurpose, machine.snapshot.sessions[session] == nil { sendJoin() }
  }

  func joined(_ ev: JSONValue) {
    guard ev["session"]?.stringValue == session else { return }
    let fresh = !view.member
    if let seq = ev["seq"]?.int, seq < view.lastSeq, !ctx.resetSessions.contains(session) {
      ctx.resetSessions.insert(session)
      ctx.checker.note("\(session) restarted its seq (\(view.lastSeq) → \(seq)): its deliveries are not counted")
    }
    if !fresh, ev["recovered"]?.boolValue == false {
      ctx.checker.note("resume fell back to a fresh snapshot (recovered: false)")
    }
    // The machine decoded the snapshot (RelayClientCore's `Decoding`) just before.
    guard let snapshot = machine.snapshot.sessions[session] else { return }
    view.applySnapshot(snapshot)
    if fresh || resuming { engine.botBecameReady(self) }
    resuming = false
  }

  /// §8: `session.resumed.seq` is the last session event the replay included.
  func resumedSession(_ ev: JSONValue) {
    let seq = ev["seq"]?.int ?? -1
    ctx.checker.expect(
      seq == view.lastSeq, .resume, "\(uid): session.resumed seq \(seq) but replay ended at \(view.lastSeq)")
    resuming = false
    engine.botBecameReady(self)
  }

  func leftSession(_ ev: JSONValue) {
    let reason = ev["reason"]?.stringValue ?? "?"
    view.closeInterval()
    if reason != "left" || !leftOnPurpose {
      ctx.checker.fail(.connection, "\(uid): unexpected session.left (\(reason))")
    }
  }

  // MARK: messages and hand events

  /// §7a message event: one delivery, timed from the embedded send stamp.
  func receivedMessage(seq: Int, _ ev: JSONValue) {
    ledger.seqs.insert(seq)
    view.messagesReceived += 1
    countDelivery(data: ev["data"], from: ev["from"]?.stringValue)
  }

  func countDelivery(data: JSONValue?, from: String?) {
    let t = data?["t"]?.double
    countDelivery(
      sentNs: t.flatMap { $0 > 0 ? UInt64(exactly: $0.rounded()) : nil }, fromMe: from == uid, at: Loop.hrtimeNs())
  }

  /// `receivedNs`: when the read carrying the delivery returned.
  func countDelivery(sentNs: UInt64?, fromMe: Bool, at receivedNs: UInt64) {
    stats.deliveries += 1
    // A replay after resume delivers old events late by design: counted,
    // but kept out of the latency histogram (it would measure the outage).
    if let sentNs, !resuming { stats.delivery.record(ns: receivedNs &- sentNs) }
    if fromMe, isPublisher {
      inflight -= 1
      engine.publisherMayContinue(self)
    }
  }

  /// Hand events are timed from the command that caused them, matched by
  /// (uid, seq): the first receiver pins the command's send time for the seq.
  func timeHandEvent(seq: Int, subject: String) {
    let eventKey = session + "|" + String(seq)
    var sentNs = ctx.handEventNs[eventKey]
    if sentNs == nil, let s = ctx.handSentNs.removeValue(forKey: session + "|" + subject) {
      ctx.handEventNs[eventKey] = s
      sentNs = s
    }
    if let sentNs, !resuming { ctx.stats.handDelivery.record(ns: Loop.hrtimeNs() &- sentNs) }
  }

  /// Broadcast peers echo our frame verbatim: `{"from", "data": {"t", "n"}}`.
  func receivedBroadcast(_ ev: JSONValue) {
    countDelivery(data: ev["data"], from: ev["from"]?.stringValue)
  }
}
