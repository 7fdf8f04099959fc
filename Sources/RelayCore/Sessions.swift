// Sessions (§6): join with snapshot, takeover, leave, removal, and the emission of
// session events (§2: numbered, recorded, sent to every current member).
import RelayProtocol

/// Why a participant leaves a session (`participant.left.reason`, `hand.lowered.reason`).
enum LeaveReason: String {
  case left, removed, idle
  case timedOut = "timed_out"
}

extension RelayCore {
  // MARK: Session events

  /// Encodes one session event once (§2: `{type, session, seq, ts, …}`), records it in
  /// the replay log and sends the one payload to every connected member except
  /// `excluding` (only the joiner, whose event is folded into its snapshot).
  /// `recordAs`: a compact form the replay log keeps instead of the payload.
  @discardableResult
  func emit(
    _ session: Session, _ type: String, at: Instant, excluding: ConnectionID? = nil,
    recordAs compact: RecordedBody? = nil, _ body: (inout JSONWriter) -> Void
  ) -> Int64 {
    session.seq += 1
    let payload = encodeEvent(type, session: session.id, seq: session.seq, wallMs: at.wallMs, body)
    session.replay.record(seq: session.seq, atMonoMs: at.monoMs, compact ?? .payload(payload))
    replayBudget.recorded(session, seq: session.seq)
    liveness.eventTap?(session.id, session.seq, payload)
    let recipients = session.connections(excluding: excluding)
    counters.deliveries += UInt64(recipients.count)
    if presenceDiffCapable > 0, Self.isMembershipEvent(type) {
      deliverMembership(session, seq: session.seq, wallMs: at.wallMs, payload, to: recipients, type: type)
    } else {
      send(payload, to: recipients, type: type)
    }
    return session.seq
  }

  /// §6 `session.joined {session, seq, self, participants, hands}`; on a resume whose
  /// events are no longer kept, with `recovered: false` (§8). The member and hand
  /// lists are the session's shared bytes; only `self` is written per joiner.
  func sendSnapshot(_ session: Session, to c: ConnectionID, uid: String, recovered: Bool? = nil) {
    guard let me = session[uid] else { return }
    sendPersonal(c, type: "session.joined") { w in
      w.field("session", session.id)
      w.field("seq", session.seq)
      w.key("self")
      w.participant(me)
      w.raw(session.membersAndHandsBytes())
      if let recovered { w.field("recovered", recovered) }
    }
  }

  /// The session a member connection acts in. Membership is per connection (§7a), and
  /// a session the connection is not in is `not_in_session` whether it exists or not
  /// (so outsiders cannot probe session ids).
  func memberSession(_ id: String, _ request: Request) throws(Refusal) -> (Session, Participant) {
    guard request.connection.sessions.contains(id), let session = sessions[id],
      let me = session[request.uid], me.connection == request.c
    else { throw Refusal(.notInSession, "not in session \(id)") }
    return (session, me)
  }

  // MARK: Join (§6)

  func join(_ id: String, _ request: Request) throws(Refusal) {
    let identity = request.identity
    guard config.devMode || identity.sessions.allows(id) || grantedSessions[identity.uid]?.contains(id) == true
    else { throw Refusal(.forbidden, "token does not allow session \(id)") }
    if let existing = sessions[id], existing[identity.uid] == nil {
      try checkSessionJoinRate(existing, request)  // before anything is counted
    }
    try acquireJoinRate(request)
    if request.connection.sessions.contains(id), let session = sessions[id] {
      // Joining again from the same connection: idempotent, a fresh snapshot.
      ok(request)
      sendSnapshot(session, to: request.c, uid: identity.uid)
      return
    }
    guard request.connection.sessions.count < config.maxSessionsPerConnection else {
      throw Refusal(.rateLimited, "at most \(config.maxSessionsPerConnection) sessions per connection")
    }
    let session = sessions[id] ?? makeSession(id)
    if let existing = session[identity.uid] {
      ok(request)
      takeOver(existing, in: session, request)
    } else {
      guard session.count < config.maxParticipants else {
        throw Refusal(.sessionFull, "session \(id) is full")
      }
      ok(request)
      addParticipant(to: session, request)
    }
    sendSnapshot(session, to: request.c, uid: identity.uid)
  }

  func addParticipant(to session: Session, _ request: Request) {
    if sessions[session.id] == nil { sessionWebhook("session.created", session.id, at: request.at) }
    sessions[session.id] = session
    let participant = Participant(profile: request.profile, connection: request.c, at: request.at)
    countSessionChurn(session, at: request.at)
    session.add(participant)
    request.connection.sessions.append(session.id)
    snapshotTouch(request.connection)
    idleMembershipChanged(session, at: request.at)  // §5: a join cancels the countdown
    // §2: the joiner's own participant.joined is folded into its snapshot.
    let profile = participant.profile
    let wallMs = request.at.wallMs
    let compact = RecordedBody.joined(profile, wallMs: wallMs)
    emit(session, "participant.joined", at: request.at, excluding: request.c, recordAs: compact) { w in
      w.joinedParticipant(profile, wallMs: wallMs)
    }
  }

  /// §6: the same user joining from another connection takes over its participant.
  /// The older connection gets `session.left {replaced}` and stays open; members see
  /// `participant.restored` only if the user was lost.
  func takeOver(_ participant: Participant, in session: Session, _ request: Request) {
    if let old = participant.connection, let oldConnection = connections[old] {
      oldConnection.sessions.removeAll { $0 == session.id }
      snapshotTouch(oldConnection)
      sendSessionLeft(session.id, to: old, reason: "replaced")
    }
    let wasLost = participant.status == .lost
    session.attach(participant, to: request.c)  // `connected` from here on
    request.connection.sessions.append(session.id)
    snapshotTouch(request.connection)
    participant.profile = request.profile
    session.invalidateSnapshot()
    if wasLost {
      counters.restored += 1
      emit(session, "participant.restored", at: request.at, excluding: request.c) { w in
        w.field("uid", participant.uid)
      }
    }
  }

  func sendSessionLeft(_ session: String, to c: ConnectionID, reason: String) {
    sendPersonal(c, type: "session.left") { w in
      w.field("session", session)
      w.field("reason", reason)
    }
  }

  // MARK: Leave and removal (§6)

  func leave(_ id: String, _ request: Request) throws(Refusal) {
    let (session, _) = try memberSession(id, request)
    try acquireJoinRate(request)
    countSessionChurn(session, at: request.at)
    ok(request)
    sendSessionLeft(id, to: request.c, reason: "left")
    removeParticipant(request.uid, from: id, reason: .left, by: request.uid, at: request.at)
  }

  /// `participant.remove {session, uid}` (§6): host only; unknown uid → not_found.
  func removeByHost(_ id: String, uid: String, _ request: Request) throws(Refusal) {
    let (session, me) = try memberSession(id, request)
    guard me.role == .host else { throw Refusal(.forbidden, "host role required") }
    guard let target = session[uid] else { throw Refusal(.notFound, "no participant \(uid)") }
    ok(request)
    if let c = target.connection { sendSessionLeft(id, to: c, reason: "removed") }
    removeParticipant(uid, from: id, reason: .removed, by: request.uid, at: request.at)
  }

  /// Looks the participant up, then `removeParticipant(_:from:reason:by:at:)`.
  func removeParticipant(_ uid: String, from id: String, reason: LeaveReason, by: String?, at: Instant) {
    guard let session = sessions[id], let participant = session[uid] else { return }
    removeParticipant(participant, from: session, reason: reason, by: by, at: at)
  }

  /// The one removal sequence (§5, §6), whatever the cause: takes the participant out,
  /// then tells the remaining members `hand.lowered` if its hand was up, then
  /// `participant.left {reason}` — or `participant.timed_out` after grace (§5).
  /// `by` is the user whose action it was (the leaver itself for `left`, the host for
  /// `removed`); nil (admin API, a timer) is sent as `by: null` (§6.2), and a hand
  /// lowered by a timer has reason `timed_out`. An emptied session is dropped (nobody
  /// is left to resume it) and ends with the `session.ended` webhook (§11).
  func removeParticipant(_ participant: Participant, from session: Session, reason: LeaveReason, by: String?, at: Instant) {
    let uid = participant.uid
    let id = session.id
    if let c = participant.connection, let connection = connections[c] {
      connection.sessions.removeAll { $0 == id }
      snapshotTouch(connection)
    }
    session.remove(uid)
    if let index = session.handIndex(of: uid) {
      session.hands.remove(at: index)
      let handReason = reason == .idle ? LeaveReason.timedOut : reason
      emit(session, "hand.lowered", at: at) { w in
        w.field("uid", uid)
        w.nullableField("by", by)
        w.field("reason", handReason.rawValue)
      }
    }
    if reason == .timedOut {
      emit(session, "participant.timed_out", at: at) { w in w.field("uid", uid) }
    } else {
      emit(session, "participant.left", at: at) { w in
        w.field("uid", uid)
        w.field("reason", reason.rawValue)
      }
    }
    if session.isEmpty, sessions[id] === session {
      sessions[id] = nil
      sessionWebhook("session.ended", id, at: at)
    }
    idleMembershipChanged(session, at: at)
  }
}
