// Wire shapes of the objects the core sends (§4, §6, §7). Each writes into a
// JSONWriter so events are encoded once, straight to bytes.
import RelayProtocol

extension JSONWriter {
  /// §6 participant object `{uid, name, avatar?, role, joinedAt, status}`.
  mutating func participant(_ p: Participant) {
    participant(p.profile, joinedAt: p.joinedAtWallMs, status: p.status)
  }

  mutating func participant(_ profile: Profile, joinedAt: Int64, status: ParticipantStatus) {
    beginObject()
    field("uid", profile.uid)
    field("name", profile.name)
    optionalField("avatar", profile.avatar)
    field("role", profile.role.rawValue)
    field("joinedAt", joinedAt)
    field("status", status.rawValue)
    endObject()
  }

  /// The body of `participant.joined` for a participant created at `wallMs` (its
  /// `joinedAt`), still `connected`: the one encoder of live events and of replay.
  mutating func joinedParticipant(_ profile: Profile, wallMs: Int64) {
    key("participant")
    participant(profile, joinedAt: wallMs, status: .connected)
  }

  /// §6 hand object `{uid, name, raisedAt}`.
  mutating func hand(_ h: Hand) {
    beginObject()
    field("uid", h.uid)
    field("name", h.name)
    field("raisedAt", h.raisedAtWallMs)
    endObject()
  }

  /// `participants` and `hands` arrays of a snapshot (§6), in join / queue order.
  mutating func membersAndHands(_ session: Session) {
    key("participants")
    beginArray()
    for p in session.members { participant(p) }
    endArray()
    key("hands")
    beginArray()
    for h in session.hands { hand(h) }
    endArray()
  }
}

/// Encodes one session event `{type, session, seq, ts, …}` (§2).
func encodeEvent(
  _ type: String, session: String, seq: Int64, wallMs: Int64, _ body: (inout JSONWriter) -> Void
) -> Payload {
  var writer = JSONWriter()
  writer.beginObject()
  writer.field("type", type)
  writer.field("session", session)
  writer.field("seq", seq)
  writer.field("ts", wallMs)
  body(&writer)
  writer.endObject()
  return Payload(writer.bytes)
}

/// Builds a complete personal message `{type, re?, …}` as a Payload.
func makeMessage(type: String, re: String? = nil, _ body: (inout JSONWriter) -> Void) -> Payload {
  var writer = JSONWriter()
  writer.beginObject()
  writer.field("type", type)
  writer.optionalField("re", re)
  body(&writer)
  writer.endObject()
  return Payload(writer.bytes)
}
