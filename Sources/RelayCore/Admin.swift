// Entry points of the HTTP admin API (§6, §10) used by the shell.
import RelayProtocol

extension RelayCore {
  /// `POST /v1/sessions`: a new, unguessable session id (16 random bytes = 128 bits,
  /// URL-safe base64 from the injected source). The session exists, empty, until its
  /// first participant joins and then leaves.
  public func createSession(at: Instant) -> String {
    var id = ids.token(byteCount: 16)
    while sessions[id] != nil { id = ids.token(byteCount: 16) }
    sessions[id] = makeSession(id)
    sessionWebhook("session.created", id, at: at)
    return id
  }

  /// `GET /v1/sessions/{id}` body `{sessionId, seq, participants, hands}`; nil → 404.
  public func sessionInfo(_ id: String) -> [UInt8]? {
    guard let session = sessions[id] else { return nil }
    var writer = JSONWriter()
    writer.beginObject()
    writer.field("sessionId", session.id)
    writer.field("seq", session.seq)
    writer.membersAndHands(session)
    writer.endObject()
    return writer.bytes
  }

  /// `DELETE /v1/sessions/{id}/participants/{uid}` (§6): like `participant.remove` with
  /// no acting user. False → 404 (unknown session or uid).
  public func removeParticipant(session id: String, uid: String, at: Instant) -> Bool {
    guard let session = sessions[id], let target = session[uid] else { return false }
    if let c = target.connection { sendSessionLeft(id, to: c, reason: "removed") }
    removeParticipant(uid, from: id, reason: .removed, by: nil, at: at)
    return true
  }
}
