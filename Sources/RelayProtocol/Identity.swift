// Who a connection speaks for, once `hello` is accepted (PROTOCOL.md §3). Lives in
// RelayProtocol so both the core and the shell (token verification) can see it.

/// The role claim (§3): hosts may act on other participants.
public enum Role: String, Sendable, Equatable {
  case host
  case participant
}

/// Which sessions a user may join (§3 `sessions` claim).
public enum SessionGrant: Sendable, Equatable {
  /// `["*"]`, and every dev-mode user.
  case any
  /// The listed ids; an absent claim is `.only([])` (call sessions are granted apart).
  case only([String])

  public func allows(_ session: String) -> Bool {
    switch self {
    case .any: return true
    case .only(let ids): return ids.contains(session)
    }
  }
}

/// An authenticated user.
public struct Identity: Sendable, Equatable {
  public var uid: String
  /// Display name; the `name` claim, or the uid when the token has none.
  public var name: String
  public var avatar: String?
  public var role: Role
  public var sessions: SessionGrant
  /// `exp` in Unix ms, when known (token mode).
  public var expiresAtMs: Int64?

  public init(
    uid: String, name: String, avatar: String? = nil, role: Role = .participant,
    sessions: SessionGrant = .only([]), expiresAtMs: Int64? = nil
  ) {
    self.uid = uid
    self.name = name
    self.avatar = avatar
    self.role = role
    self.sessions = sessions
    self.expiresAtMs = expiresAtMs
  }
}
