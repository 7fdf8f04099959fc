// The client's place across a relaunch (protocol/ §9): the resume token and, per
// session, the snapshot its replay continues from, as bytes a shell keeps in a file.
// Sessions are stored in the shape of `session.joined` (§5.2), so the one decoder of
// snapshots reads them back.

import RelayProtocol

/// What a relaunched client needs to resume instead of joining afresh (§9).
public struct ResumeRecord: Sendable, Equatable {
  /// The format of `encoded()`; a record of another version is not read.
  static let version: Int64 = 1
  /// The relay the token belongs to (its WebSocket URL).
  public var relay: String
  /// The user of the token (`welcome.user.uid`).
  public var uid: String?
  /// `welcome.resumeToken` of the latest connection.
  public var token: String
  /// Joined sessions, each with the `seq` its state was taken at.
  public var sessions: [SessionState]

  /// Memberwise initialiser.
  public init(relay: String, uid: String?, token: String, sessions: [SessionState]) {
    self.relay = relay
    self.uid = uid
    self.token = token
    self.sessions = sessions
  }

  /// True when only `seq`s (and what events changed) differ from `other`: a change
  /// that may be written late, as a record a few events old still resumes exactly.
  public func sameMembership(as other: ResumeRecord) -> Bool {
    relay == other.relay && token == other.token && sessions.map(\.id) == other.sessions.map(\.id)
  }

  /// Compact JSON.
  public func encoded() -> [UInt8] {
    var o = JSONObject()
    o.append("v", .number(JSONNumber(Self.version)))
    o.append("relay", .string(relay))
    if let uid { o.append("uid", .string(uid)) }
    o.append("token", .string(token))
    o.append("sessions", .array(sessions.map { .object(Self.joined($0)) }))
    return JSONValue.object(o).encoded()
  }

  /// Reads `encoded()` output; nil for anything else (a damaged or foreign file).
  public init?(decoding bytes: [UInt8]) {
    guard let o = try? JSONParser.parse(bytes).objectValue, o.int("v") == Self.version,
      let relay = o.str("relay"), let token = o.str("token"), let list = o["sessions"]?.arrayValue
    else { return nil }
    var sessions: [SessionState] = []
    for item in list {
      guard let session = item.objectValue.flatMap(Decoding.session) else { return nil }
      sessions.append(session)
    }
    self.init(relay: relay, uid: o.str("uid"), token: token, sessions: sessions)
  }

  /// A session as its `session.joined` snapshot (§5.2).
  static func joined(_ s: SessionState) -> JSONObject {
    var o = JSONObject()
    o.append("session", .string(s.id))
    o.append("seq", .number(JSONNumber(s.seq)))
    o.append("self", .object(JSONObject([("uid", .string(s.selfUID))])))
    o.append("participants", .array(s.participants.map { .object(participant($0)) }))
    o.append("hands", .array(s.hands.map { .object(hand($0)) }))
    return o
  }

  static func participant(_ p: Participant) -> JSONObject {
    var o = JSONObject()
    o.append("uid", .string(p.uid))
    o.append("name", .string(p.name))
    if let avatar = p.avatar { o.append("avatar", .string(avatar)) }
    o.append("role", .string(p.role))
    o.append("joinedAt", .number(JSONNumber(p.joinedAt)))
    o.append("status", .string(p.status.rawValue))
    return o
  }

  static func hand(_ h: RaisedHand) -> JSONObject {
    JSONObject([
      ("uid", .string(h.uid)), ("name", .string(h.name)), ("raisedAt", .number(JSONNumber(h.raisedAt))),
    ])
  }
}

extension ClientMachine {
  /// The place to keep for a relaunch: nil before the first `welcome` and after
  /// `disconnect()` (a deliberate leave ends the place, §5.3). `relay` is the URL.
  public func resumeRecord(relay: String) -> ResumeRecord? {
    guard let resumeToken, connectionState != .disconnected || restoredUID != nil else { return nil }
    let sessions = snapshot.sessions.values.sorted { $0.id < $1.id }
    return ResumeRecord(relay: relay, uid: snapshot.user?.uid ?? restoredUID ?? nil, token: resumeToken, sessions: sessions)
  }

  /// Takes a stored place before `connect`: the first `hello` resumes it (§9); if
  /// the relay no longer holds it, the sessions are joined afresh (§18 item 5).
  /// Ignored once the machine has connected.
  public mutating func restore(_ record: ResumeRecord) {
    guard connectionState == .disconnected, resumeToken == nil else { return }
    resumeToken = record.token
    restoredUID = .some(record.uid)
    for session in record.sessions { snapshot.sessions[session.id] = session }
  }
}
