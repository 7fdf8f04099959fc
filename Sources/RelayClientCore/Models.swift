// The client's view of the relay's state (PROTOCOL.md §4–§9): plain value types,
// `Sendable`, so a snapshot can cross from the I/O thread to the app's queue.

public import RelayProtocol

/// How the client identifies itself in `hello` (§3).
public enum RelayAuth: Sendable, Equatable {
  /// An HS256 JWT minted by the app's server (`hello.token`).
  case token(String)
  /// Dev mode only (a relay started without `--secret`): `hello.dev`.
  case dev(uid: String, name: String, role: String? = nil)
}

/// Where the connection to the relay stands.
public enum ConnectionState: String, Sendable, Equatable {
  /// Not started, or stopped by `disconnect()`.
  case disconnected
  /// First connection attempt(s), before the first `welcome`.
  case connecting
  /// `welcome` received; commands flow.
  case connected
  /// The connection was lost; the client retries with backoff and resumes (§8).
  case reconnecting
  /// The relay closed the connection for good (1000 or 4500–4999, §2): no retry.
  case closed
}

/// A participant's liveness (§5): `lost` while its connection is gone within grace.
public enum ParticipantStatus: String, Sendable, Equatable {
  /// Online.
  case connected
  /// Connection lost; kept for the grace period.
  case lost
}

/// A member of a session (§6).
public struct Participant: Sendable, Equatable, Identifiable {
  /// The user id; one participant per user and session.
  public var uid: String
  /// Display name.
  public var name: String
  /// Avatar URL, if the token carried one.
  public var avatar: String?
  /// `host` or `participant`.
  public var role: String
  /// Server wall clock (Unix ms) of the join.
  public var joinedAt: Int64
  /// Liveness as the relay last reported it.
  public var status: ParticipantStatus
  /// `Identifiable` conformance: the uid.
  public var id: String { uid }

  /// Memberwise initialiser.
  public init(
    uid: String, name: String, avatar: String? = nil, role: String = "participant",
    joinedAt: Int64 = 0, status: ParticipantStatus = .connected
  ) {
    self.uid = uid
    self.name = name
    self.avatar = avatar
    self.role = role
    self.joinedAt = joinedAt
    self.status = status
  }
}

/// One entry of a session's raised-hands queue (§7).
public struct RaisedHand: Sendable, Equatable, Identifiable {
  /// Whose hand.
  public var uid: String
  /// Display name at the time of raising.
  public var name: String
  /// Server wall clock (Unix ms) of the raise; never decreases along the queue.
  public var raisedAt: Int64
  /// `Identifiable` conformance: the uid.
  public var id: String { uid }

  /// Memberwise initialiser.
  public init(uid: String, name: String, raisedAt: Int64) {
    self.uid = uid
    self.name = name
    self.raisedAt = raisedAt
  }
}

/// What the client knows of one joined session, rebuilt only from snapshots and
/// events (§18 item 6).
public struct SessionState: Sendable, Equatable, Identifiable {
  /// The session id.
  public var id: String
  /// The `seq` of the last session event applied (§2).
  public var seq: Int64
  /// The local user's uid in this session.
  public var selfUID: String
  /// Members in join order.
  public var participants: [Participant]
  /// The raised-hands queue in server order: the first raised is first, a re-raise
  /// goes to the back (§7).
  public var hands: [RaisedHand]

  /// Memberwise initialiser.
  public init(
    id: String, seq: Int64, selfUID: String, participants: [Participant], hands: [RaisedHand]
  ) {
    self.id = id
    self.seq = seq
    self.selfUID = selfUID
    self.participants = participants
    self.hands = hands
  }

  /// The participant with `uid`, if present.
  public func participant(_ uid: String) -> Participant? {
    participants.first { $0.uid == uid }
  }
}

/// Which side of a call this client is on.
public enum CallDirection: String, Sendable, Equatable {
  /// This user initiated it.
  case outgoing
  /// This user is a callee.
  case incoming
}

/// A call's state as this client sees it (§9's terminal outcomes).
public enum CallStatus: String, Sendable, Equatable {
  /// Still ringing (for an outgoing call: at least one callee rings).
  case ringing
  /// Accepted (by this user, or for an outgoing call by a callee); not ended.
  case accepted
  /// Rejected by the callee (outgoing: every callee answered and none accepted).
  case rejected
  /// Withdrawn: cancelled, answered or rejected elsewhere, unanswered, caller timed out.
  case cancelled
  /// No callee answered within the ring timeout.
  case unanswered
  /// Every callee was busy.
  case busy
  /// Ended after being accepted.
  case ended
}

/// Why an incoming call stopped ringing here (`call.cancelled.reason`, §9).
public enum CallCancelReason: String, Sendable, Equatable {
  /// The caller cancelled.
  case cancelled
  /// This user accepted on another device.
  case answeredElsewhere = "answered_elsewhere"
  /// This user rejected on another device.
  case rejectedElsewhere = "rejected_elsewhere"
  /// The ring timed out.
  case unanswered
  /// The caller's connection was lost for longer than grace.
  case callerTimedOut = "caller_timed_out"
}

/// The caller of a call.
public struct CallUser: Sendable, Equatable {
  /// User id.
  public var uid: String
  /// Display name.
  public var name: String
  /// Avatar URL, if any.
  public var avatar: String?

  /// Memberwise initialiser.
  public init(uid: String, name: String, avatar: String? = nil) {
    self.uid = uid
    self.name = name
    self.avatar = avatar
  }
}

/// A call this client takes part in (§9).
public struct Call: Sendable, Equatable, Identifiable {
  /// Server-generated call id.
  public var id: String
  /// The session the parties join once accepted.
  public var sessionID: String
  /// Incoming or outgoing.
  public var direction: CallDirection
  /// The caller (for an outgoing call: this user, as far as known).
  public var from: CallUser
  /// The callees' uids.
  public var to: [String]
  /// Audio or video.
  public var callType: CallType
  /// App data sent with `call.initiate`.
  public var metadata: JSONObject?
  /// Server wall clock (Unix ms) when the ring times out (0 when unknown).
  public var expiresAt: Int64
  /// Where the call stands.
  public var status: CallStatus
  /// Per-callee outcome so far (`ringing`, `offline`, `accepted`, `rejected`, `busy`,
  /// `unanswered`, `ended`), for outgoing calls.
  public var callees: [String: String]
  /// For outgoing calls: how many devices of each callee the relay rang by push
  /// (`call.ringing` / `call.offline` `pushed`, §9a). A callee reported `offline`
  /// with pushes here is still being rung, on a phone whose app was asleep.
  public var pushed: [String: Int] = [:]

  /// Memberwise initialiser.
  public init(
    id: String, sessionID: String, direction: CallDirection, from: CallUser, to: [String],
    callType: CallType, metadata: JSONObject? = nil, expiresAt: Int64 = 0,
    status: CallStatus = .ringing, callees: [String: String] = [:]
  ) {
    self.id = id
    self.sessionID = sessionID
    self.direction = direction
    self.from = from
    self.to = to
    self.callType = callType
    self.metadata = metadata
    self.expiresAt = expiresAt
    self.status = status
    self.callees = callees
  }
}
