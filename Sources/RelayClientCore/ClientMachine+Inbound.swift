// Server messages (§17, "Server messages"): replies, `welcome`, personal session
// events, and session events with their `seq` checks (§18 item 2).

import RelayProtocol

extension ClientMachine {
  /// One text message from the relay. Unknown types and fields are ignored (§2).
  public mutating func received(text: [UInt8], nowMs: Int64) -> [ClientEffect] {
    guard let message = try? JSONParser.parse(text).objectValue else {
      lastInboundMs = nowMs
      return flush()
    }
    return receivedParsed(message, nowMs: nowMs)
  }

  mutating func receivedParsed(_ message: JSONObject, nowMs: Int64) -> [ClientEffect] {
    lastInboundMs = nowMs
    guard transportActive, let type = message.str("type") else { return flush() }
    switch type {
    case "welcome": welcome(message, nowMs: nowMs)
    case "ok": ok(message)
    case "error": error(message)
    case "session.joined": sessionJoined(message)
    case "session.resumed": sessionResumed(message)
    case "session.left": sessionLeft(message)
    case "session.timed_out":
      if let s = message.str("session"), snapshot.sessions.removeValue(forKey: s) != nil {
        out.append(.event(.sessionTimedOut(session: s)))
      }
    case "session.idle_warning":
      if let s = message.str("session") {
        out.append(.event(.sessionIdleWarning(session: s, timeoutAt: message.int("timeoutAt") ?? 0)))
      }
    case "participant.joined", "participant.left", "participant.lost", "participant.restored",
      "participant.timed_out", "hand.raised", "hand.lowered", "hands.cleared", "message":
      sessionEvent(type, message, nowMs: nowMs)
    case "participants.diff":
      // §5.6: the membership events of a turn, each applied as if it came alone.
      for event in (message["events"]?.arrayValue ?? []).compactMap(\.objectValue) {
        guard let eventType = event.str("type"), eventType.hasPrefix("participant.") else { continue }
        sessionEvent(eventType, event, nowMs: nowMs)
      }
    default:
      if type.hasPrefix("call.") { callEvent(type, message) }
    }
    return flush()
  }

  mutating func welcome(_ m: JSONObject, nowMs: Int64) {
    resumeToken = m.str("resumeToken")
    if let hb = m["heartbeat"]?.objectValue {
      heartbeatIntervalMs = hb.int("interval") ?? heartbeatIntervalMs
      heartbeatTimeoutMs = hb.int("timeout") ?? heartbeatTimeoutMs
    }
    if let u = m["user"]?.objectValue, let uid = u.str("uid") {
      snapshot.user = CallUser(uid: uid, name: u.str("name") ?? uid, avatar: u.str("avatar"))
    }
    welcomed = true
    connectDeadlineMs = nil
    lastPingMs = nowMs
    attempt = 0
    let fromRecord = restoredUID != nil
    // A stored place of another user (a token for someone else) is not ours to rejoin.
    if let stored = restoredUID, let storedUID = stored, storedUID != snapshot.user?.uid { snapshot.sessions = [:] }
    restoredUID = nil
    let isReconnect = everWelcomed || fromRecord
    everWelcomed = true
    snapshot.connectionState = .connected
    snapshot.resumed = m["resumed"]?.boolValue == true
    if isReconnect { out.append(.event(.connectionRestored)) }
    if isReconnect, m["resumed"]?.boolValue != true {
      // §18 item 5: state not held any more; join again and rebuild from snapshots.
      for session in snapshot.sessions.keys.sorted() {
        rejoining.insert(session)
        send(.joinSession(session), requestID: nil)
      }
    }
    if background { sendBackground() }
    let waiting = queued
    queued = []
    for q in waiting { send(q.command, requestID: q.requestID) }
  }

  mutating func ok(_ m: JSONObject) {
    guard let re = m.str("re"), let p = pending.removeValue(forKey: re) else { return }
    switch p.kind {
    case .join(let s):
      if let id = p.requestID { joinReplies[s] = (id, m) }
    case .leave(let s):
      if let id = p.requestID { leaveReplies[s] = (id, m) }
    case .initiate(let to, let callType, let metadata):
      if let callID = m.str("callId") {
        let me = snapshot.user ?? CallUser(uid: "", name: "")
        snapshot.calls[callID] = Call(
          id: callID, sessionID: m.str("sessionId") ?? "", direction: .outgoing, from: me, to: to,
          callType: callType, metadata: metadata,
          callees: Dictionary(to.map { ($0, "ringing") }, uniquingKeysWith: { a, _ in a }))
      }
      if let id = p.requestID { out.append(.reply(requestID: id, .success(m))) }
    case .other:
      if let id = p.requestID { out.append(.reply(requestID: id, .success(m))) }
    }
  }

  mutating func error(_ m: JSONObject) {
    guard let re = m.str("re"), let p = pending.removeValue(forKey: re) else { return }
    if case .join(let s) = p.kind { rejoining.remove(s) }
    let failure = RelayError.server(
      code: RelayErrorCode(rawValue: m.str("code") ?? "internal"), message: m.str("message") ?? "")
    if let id = p.requestID { out.append(.reply(requestID: id, .failure(failure))) }
  }

  // MARK: Sessions

  mutating func sessionJoined(_ m: JSONObject) {
    guard let s = m.str("session"), let fresh = Decoding.session(m) else { return }
    let recovered = m["recovered"]?.boolValue
    let wasRejoin = rejoining.remove(s) != nil
    if let old = snapshot.sessions[s], wasRejoin || recovered == false {
      // §8: the relay could not replay; the new snapshot replaces ours, and the
      // listeners hear the difference so their stream stays consistent.
      snapshot.sessions[s] = fresh
      for event in Decoding.diff(old, fresh) { out.append(.event(event)) }
      out.append(.event(.sessionJoined(fresh, recovered: false)))
    } else {
      snapshot.sessions[s] = fresh
      out.append(.event(.sessionJoined(fresh, recovered: recovered)))
    }
    if let r = joinReplies.removeValue(forKey: s) {
      out.append(.reply(requestID: r.requestID, .success(r.ok)))
    }
  }

  mutating func sessionResumed(_ m: JSONObject) {
    guard let s = m.str("session"), let seq = m.int("seq") else { return }
    // The replay ended at `seq`; ours must already be there (no gap, §8).
    if let ours = snapshot.sessions[s]?.seq, ours < seq { snapshot.sessions[s]?.seq = seq }
  }

  mutating func sessionLeft(_ m: JSONObject) {
    guard let s = m.str("session") else { return }
    snapshot.sessions[s] = nil
    out.append(.event(.sessionLeft(session: s, reason: m.str("reason") ?? "left")))
    if let r = leaveReplies.removeValue(forKey: s) {
      out.append(.reply(requestID: r.requestID, .success(r.ok)))
    }
  }

  /// Applies a session event exactly once and in order (§2, §18 item 2): a `seq` at
  /// or below ours is a replayed duplicate and is dropped; one beyond the next means
  /// a lost message, so the connection is dropped and resumed from our `seq`.
  mutating func sessionEvent(_ type: String, _ m: JSONObject, nowMs: Int64) {
    guard let s = m.str("session"), var state = snapshot.sessions[s], let seq = m.int("seq") else {
      return
    }
    if seq <= state.seq { return }
    guard seq == state.seq + 1 else {
      abortTransport(nowMs: nowMs)
      return
    }
    state.seq = seq
    let uid = m.str("uid") ?? ""
    switch type {
    case "participant.joined":
      guard let p = m["participant"]?.objectValue.flatMap(Decoding.participant) else { break }
      state.participants.removeAll { $0.uid == p.uid }
      state.participants.append(p)
      out.append(.event(.participantJoined(session: s, p)))
    case "participant.left", "participant.timed_out":
      state.participants.removeAll { $0.uid == uid }
      state.hands.removeAll { $0.uid == uid }
      out.append(
        .event(
          type == "participant.left"
            ? .participantLeft(session: s, uid: uid, reason: m.str("reason") ?? "left")
            : .participantTimedOut(session: s, uid: uid)))
    case "participant.lost", "participant.restored":
      let lost = type == "participant.lost"
      if let i = state.participants.firstIndex(where: { $0.uid == uid }) {
        state.participants[i].status = lost ? .lost : .connected
      }
      out.append(
        .event(lost ? .participantLost(session: s, uid: uid) : .participantRestored(session: s, uid: uid)))
    case "hand.raised":
      let hand = RaisedHand(uid: uid, name: m.str("name") ?? uid, raisedAt: m.int("raisedAt") ?? 0)
      // §7: queue order is the order of `hand.raised`; a re-raise goes to the back.
      state.hands.removeAll { $0.uid == uid }
      state.hands.append(hand)
      out.append(.event(.handRaised(session: s, hand)))
    case "hand.lowered":
      state.hands.removeAll { $0.uid == uid }
      let by = m.str("by") ?? uid
      out.append(.event(.handLowered(session: s, uid: uid, by: by, reason: m.str("reason") ?? "self")))
    case "hands.cleared":
      let by = m.str("by") ?? ""
      for hand in state.hands {
        out.append(.event(.handLowered(session: s, uid: hand.uid, by: by, reason: "cleared")))
      }
      state.hands = []
    default:  // "message"
      out.append(
        .event(
          .messageReceived(
            session: s, from: m.str("from") ?? "", data: m["data"] ?? .null, seq: seq,
            ts: m.int("ts") ?? 0)))
    }
    snapshot.sessions[s] = state
  }
}

extension JSONObject {
  func str(_ key: String) -> String? { self[key]?.stringValue }
  func int(_ key: String) -> Int64? { self[key]?.numberValue?.int64 }
}
