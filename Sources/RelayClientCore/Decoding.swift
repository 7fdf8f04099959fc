// Snapshot objects of §6 (`participant`, `hand`, `session.joined`) decoded into the
// client's models, and the diff that turns a replaced snapshot into events.

import RelayProtocol

enum Decoding {
  static func participant(_ o: JSONObject) -> Participant? {
    guard let uid = o.str("uid") else { return nil }
    return Participant(
      uid: uid, name: o.str("name") ?? uid, avatar: o.str("avatar"),
      role: o.str("role") ?? "participant", joinedAt: o.int("joinedAt") ?? 0,
      status: o.str("status") == "lost" ? .lost : .connected)
  }

  static func hand(_ o: JSONObject) -> RaisedHand? {
    guard let uid = o.str("uid") else { return nil }
    return RaisedHand(uid: uid, name: o.str("name") ?? uid, raisedAt: o.int("raisedAt") ?? 0)
  }

  /// A `session.joined` message as a `SessionState`. `hands` keeps the server's
  /// order (the queue, §7); `participants` carry no order on the wire, so they are
  /// put in join order (`joinedAt`, ties in wire order) for a stable UI.
  static func session(_ m: JSONObject) -> SessionState? {
    guard let id = m.str("session"), let seq = m.int("seq") else { return nil }
    let me = m["self"]?.objectValue.flatMap(participant)
    let people = (m["participants"]?.arrayValue ?? []).compactMap { $0.objectValue.flatMap(participant) }
      .enumerated().sorted { ($0.element.joinedAt, $0.offset) < ($1.element.joinedAt, $1.offset) }.map(\.element)
    let hands = (m["hands"]?.arrayValue ?? []).compactMap { $0.objectValue.flatMap(hand) }
    return SessionState(id: id, seq: seq, selfUID: me?.uid ?? "", participants: people, hands: hands)
  }

  /// Events that take a listener from `old` to `new` when a snapshot replaced the
  /// replay (§8, `recovered: false`): departures, arrivals, status changes, then the
  /// hand queue (lowerings first, then raises in the new queue's order).
  static func diff(_ old: SessionState, _ new: SessionState) -> [ClientEvent] {
    let s = new.id
    var events: [ClientEvent] = []
    for hand in old.hands where !new.hands.contains(where: { $0.uid == hand.uid && $0.raisedAt == hand.raisedAt }) {
      events.append(.handLowered(session: s, uid: hand.uid, by: hand.uid, reason: "resync"))
    }
    for p in old.participants where new.participant(p.uid) == nil {
      events.append(.participantLeft(session: s, uid: p.uid, reason: "resync"))
    }
    for p in new.participants {
      guard let before = old.participant(p.uid) else {
        events.append(.participantJoined(session: s, p))
        continue
      }
      if before.status != p.status {
        events.append(
          p.status == .lost ? .participantLost(session: s, uid: p.uid) : .participantRestored(session: s, uid: p.uid))
      }
    }
    for hand in new.hands where !old.hands.contains(where: { $0.uid == hand.uid && $0.raisedAt == hand.raisedAt }) {
      events.append(.handRaised(session: s, hand))
    }
    return events
  }

  /// `call.incoming` as a `Call`.
  static func incomingCall(_ m: JSONObject) -> Call? {
    guard let id = m.str("callId"), let from = m["from"]?.objectValue, let uid = from.str("uid") else {
      return nil
    }
    return Call(
      id: id, sessionID: m.str("sessionId") ?? "", direction: .incoming,
      from: CallUser(uid: uid, name: from.str("name") ?? uid, avatar: from.str("avatar")),
      to: (m["to"]?.arrayValue ?? []).compactMap(\.stringValue),
      callType: CallType(rawValue: m.str("callType") ?? "") ?? .audio,
      metadata: m["metadata"]?.objectValue, expiresAt: m.int("expiresAt") ?? 0)
  }
}
