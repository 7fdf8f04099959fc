// Typed errors of the SDK: the relay's `error.code` (§2) kept as its wire string,
// plus the failures that happen on this side of the socket.

public import RelayProtocol

/// An `error.code` of the protocol (§2). A struct over the wire string rather than
/// an enum, so a code added by a later protocol version still reaches the app.
public struct RelayErrorCode: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
  /// The wire string, e.g. `"forbidden"`.
  public var rawValue: String
  /// Wraps a wire string.
  public init(rawValue: String) { self.rawValue = rawValue }
  /// Wraps one of the relay's own codes.
  public init(_ code: ErrorCode) { rawValue = code.rawValue }
  /// The wire string.
  public var description: String { rawValue }

  /// Not JSON, missing or mistyped field, value out of range.
  public static let badRequest = Self(.badRequest)
  /// Unknown command type.
  public static let unknownType = Self(.unknownType)
  /// Command before `hello`.
  public static let unauthorized = Self(.unauthorized)
  /// The role or token does not allow it.
  public static let forbidden = Self(.forbidden)
  /// Unknown session, call or user.
  public static let notFound = Self(.notFound)
  /// `--max-participants` reached.
  public static let sessionFull = Self(.sessionFull)
  /// A rate or count limit.
  public static let rateLimited = Self(.rateLimited)
  /// The call already reached a terminal state for this party.
  public static let conflict = Self(.conflict)
  /// This connection is not a member of that session.
  public static let notInSession = Self(.notInSession)
  /// Server bug; the command had no effect.
  public static let `internal` = Self(.internal)
  /// Cluster mode: shared state unreachable (§12).
  public static let unavailable = Self(rawValue: "unavailable")
}

/// Why a command failed.
public enum RelayError: Error, Sendable, Equatable, CustomStringConvertible {
  /// The relay answered `error` (§2): act on `code`; `message` is for logs.
  case server(code: RelayErrorCode, message: String)
  /// The client is `disconnected` or `closed`: nothing was sent.
  case notConnected
  /// The connection dropped before the reply arrived: the command may or may not
  /// have taken effect; the event stream after the resume tells which.
  case connectionLost
  /// The relay closed the connection for good with this close code (§2).
  case closed(code: UInt16)

  /// The protocol error code, for `.server`.
  public var code: RelayErrorCode? {
    if case .server(let code, _) = self { return code }
    return nil
  }

  /// A readable summary.
  public var description: String {
    switch self {
    case .server(let code, let message): return "\(code): \(message)"
    case .notConnected: return "not connected"
    case .connectionLost: return "connection lost before the reply"
    case .closed(let code): return "connection closed (\(code))"
    }
  }
}
