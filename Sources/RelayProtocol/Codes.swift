// Error and close codes of the contract (PROTOCOL.md §2), named once so no other
// file spells them.

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

/// WebSocket close codes used by the relay (§2). 4000–4499: reconnect with resume
/// after backoff; 4500–4999: do not reconnect automatically.
public enum CloseCode {
  public static let normal: UInt16 = 1000
  public static let goingAway: UInt16 = 1001
  public static let protocolError: UInt16 = 1002
  public static let unsupportedData: UInt16 = 1003
  public static let invalidPayload: UInt16 = 1007
  public static let policyViolation: UInt16 = 1008
  public static let messageTooBig: UInt16 = 1009
  public static let internalError: UInt16 = 1011
  /// RFC 6455 §7.4 registry "Service Restart": cluster mode closes a node's sockets
  /// with it when the node must rebuild its state (it was declared dead, or Redis
  /// came back empty); reconnect with resume, like 1001.
  public static let serviceRestart: UInt16 = 1012
  /// Outbound queue over `--max-outbound-bytes`.
  public static let slowConsumer: UInt16 = 4008
  /// `--max-bad-messages` consecutive bad messages.
  public static let tooManyBadMessages: UInt16 = 4029
  /// Bad or expired token, no `hello` in time, command before `hello`.
  public static let unauthorized: UInt16 = 4501
  /// A newer connection resumed this one (§8).
  public static let replaced: UInt16 = 4509
}
