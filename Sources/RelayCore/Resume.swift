// §8 resume and replay (protocol/PROTOCOL.md §9): a reconnecting client names its old
// connection by `resumeToken` and, per session, the last `seq` it saw. Two phases,
// because §4 orders the output `welcome` → `call.incoming` → replays:
//   1. `resumeHeldState` (before `welcome`): decide, re-attach, close the old
//      connection (4509), tell members `participant.restored`;
//   2. `replayResumed` (after `welcome` and ringing): per listed session, the missed
//      events then `session.resumed`, or a fresh snapshot with `recovered: false`.
// Nothing is emitted into a resumed session between the two phases, so replay plus
// live stream has every seq exactly once.
import RelayProtocol
import RelayPrimitives

extension RelayCore {
  /// Phase 1. True (`welcome.resumed`) when the token was issued to this user and its
  /// state is still held: the old connection is open, or it was lost and its grace
  /// has not ended. Unknown, foreign or expired tokens → false, nothing changes.
  func resumeHeldState(_ resume: ResumeRequest?, _ request: Request) -> Bool {
    guard let resume else { return false }
    let token = ResumeToken(resume.token)
    let holder = tokenHolder(token, of: request.uid)
    let record = liveness.recordByToken[token]
    guard holder != nil || record.flatMap({ liveness.records[$0]?.uid }) == request.uid else { return false }
    let old = holder.flatMap { $0.phase == .ready && $0.id != request.c ? $0 : nil }
    guard old != nil || record != nil else { return false }
    // A resume token is spent once used; the new connection has its own.
    if let holder {
      holder.tokenSpent = true
      snapshotTouch(holder)
    }
    liveness.recordByToken[token] = nil
    for entry in resume.sessions {
      reattach(entry.session, from: old, record: record, request)
    }
    // §8: the old connection is closed with 4509. Sessions moved above are no longer
    // its own; any it still has the client did not ask back, and they end as the
    // core's own closes do: a clean `participant.left`.
    if let old {
      close(old, code: CloseCode.replaced, reason: "replaced by a resumed connection", at: request.at)
    }
    return true
  }

  /// The connection of `uid` whose resume token this is, while the token works
  /// there: not closed (or closing, until `closed`) and not spent. A token also works
  /// through its `LostRecord` during grace. A token is only ever good for the user it
  /// was issued to (§8), so looking among that user's few connections is the whole
  /// index: no table of tokens is kept.
  func tokenHolder(_ token: ResumeToken, of uid: String) -> Connection? {
    userConnections.first(key: uid) { $0.token == token && !$0.tokenSpent }
  }

  /// Moves the user's participant in `id` to the new connection if this resume holds
  /// it: attached to the old connection, or lost with it (its `LostRecord`, within
  /// grace). Only the token's own connection's state is taken: the client's seq
  /// positions describe that connection's streams, not another device's. A lost one
  /// comes back with `participant.restored`, sent to the other members now and to the
  /// resumer in its replay (§8).
  private func reattach(_ id: String, from old: Connection?, record: UInt64?, _ request: Request) {
    let connection = request.connection
    guard !connection.sessions.contains(id), connection.sessions.count < config.maxSessionsPerConnection,
      let session = sessions[id], let participant = session[request.uid]
    else { return }
    if let current = participant.connection {
      guard let old, current == old.id else { return }  // held by another live connection
      old.sessions.removeAll { $0 == id }
      setConnection(participant, in: session, request.c)
      connection.sessions.append(id)
      snapshotTouch(old)
      snapshotTouch(connection)
      return
    }
    guard participant.status == .lost, let record,
      liveness.lostOwner[ParticipantKey(session: id, uid: request.uid)] == record
    else { return }
    liveness.lostOwner[ParticipantKey(session: id, uid: request.uid)] = nil
    setConnection(participant, in: session, request.c)  // `connected` again
    connection.sessions.append(id)
    snapshotTouch(connection)
    counters.restored += 1
    emit(session, "participant.restored", at: request.at, excluding: request.c) { w in
      w.field("uid", participant.uid)
    }
  }

  /// Phase 2, only after `welcome {resumed: true}`. Per listed session, in the
  /// client's order: replay of every kept event with seq > the client's, then
  /// `session.resumed {session, recovered: true, seq}`; or, if some of them are no
  /// longer kept (§8 `replayEvents` / `replayAgeMs`), a fresh `session.joined` with
  /// `recovered: false`. A listed session this resume does not hold gets
  /// `session.left` — `replaced` if another connection of the user holds it,
  /// `removed` if the user is no longer in it — so the client never waits in vain.
  func replayResumed(_ resume: ResumeRequest?, _ request: Request) {
    guard let resume else { return }
    let c = request.c
    var answered: Set<String> = []
    for entry in resume.sessions where answered.insert(entry.session).inserted {
      let id = entry.session
      guard request.connection.sessions.contains(id), let session = sessions[id] else {
        let elsewhere = sessions[id]?[request.uid] != nil
        sendSessionLeft(id, to: c, reason: elsewhere ? "replaced" : "removed")
        continue
      }
      if let missed = session.replay.events(after: entry.seq, lastSeq: session.seq, now: request.at.monoMs) {
        for event in missed { effects.append(.send(event.payload, to: [c])) }
        sendPersonal(c, type: "session.resumed") { w in
          w.field("session", id)
          w.field("recovered", true)
          w.field("seq", session.seq)
        }
      } else {
        sendSnapshot(session, to: c, uid: request.uid, recovered: false)
      }
    }
  }

}
