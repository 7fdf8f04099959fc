// Wire shapes of the objects the core sends (§4, §6, §7). Each writes into a
// JSONWriter so events are encoded once, straight to bytes.
import RelayProtocol

extension JSONWriter {
  /// §6 participant object `{uid, name, avatar?, role, joinedAt, status}`.
  mutating func participant(_ p: Participant) {
    beginObject()
    field("uid", p.uid)
    field("name", p.name)
    optionalField("avatar", p.avatar)
    field("role", p.role.rawValue)
    field("joinedAt", p.joinedAtWallMs)
    field("status", p.status.rawValue)
    endObject()
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
