// Error and close codes of the contract (PROTOCOL.md §2), named once so no other
// file spells them.
public import RelayPrimitives

/// `error.code` values (§2). Raw values are the wire strings.
public enum ErrorCode: String, Sendable, CaseIterable {
  case badRequest = "bad_request"
  case unknownType = "unknown_type"
  case unauthorized = "unauthorized"
  case forbidden = "forbidden"
  case notFound = "not_found"
  case sessionFull = "session_full"
  case rateLimited = "rate_limited"
  case conflict = "conflict"
  case notInSession = "not_in_session"
  case `internal` = "internal"
  /// §12 cluster mode: the shared state (Redis) cannot be reached; nothing changed.
  case unavailable = "unavailable"

  /// §2: a "bad message" is one answered with `bad_request` or `unknown_type`; only
  /// those count toward `--max-bad-messages`.
  public var isBadMessage: Bool { self == .badRequest || self == .unknownType }
}

/// The relay's own WebSocket close codes (§14), beside RFC 6455's in RelayPrimitives'
/// `CloseCode`. 4000–4499: reconnect with resume after backoff; 4500–4999: do not
/// reconnect automatically.
extension CloseCode {
  /// Outbound queue over `--max-outbound-bytes` (or the process-wide budget).
  public static let slowConsumer: UInt16 = 4008
  /// `--max-bad-messages` consecutive bad messages.
  public static let tooManyBadMessages: UInt16 = 4029
  /// Bad or expired token, no `hello` in time, command before `hello`.
  public static let unauthorized: UInt16 = 4501
  /// A newer connection resumed this one (§8).
  public static let replaced: UInt16 = 4509
}
