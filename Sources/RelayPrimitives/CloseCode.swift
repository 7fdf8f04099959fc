// Close status codes (RFC 6455 §7.4 and the IANA "WebSocket Close Code
// Number Registry").

/// Close codes the decoder sends, the rule for codes it receives, and what a
/// client does after each (protocol/ §14). The relay's own 4xxx codes are named
/// in RelayProtocol (Codes.swift).
public enum CloseCode {
  public static let normal: UInt16 = 1000
  public static let goingAway: UInt16 = 1001
  public static let protocolError: UInt16 = 1002
  public static let unsupportedData: UInt16 = 1003
  /// Reported in `.closed` when the peer's close frame had no payload
  /// (§7.1.5); never sent on the wire (§7.4.1).
  public static let noStatusReceived: UInt16 = 1005
  public static let invalidPayload: UInt16 = 1007
  public static let policyViolation: UInt16 = 1008
  public static let messageTooBig: UInt16 = 1009
  public static let internalError: UInt16 = 1011
  /// IANA registry "Service Restart": the relay's cluster mode closes a node's
  /// sockets with it when the node must rebuild its state (protocol/ §13.1);
  /// clients reconnect and resume, as after 1001.
  public static let serviceRestart: UInt16 = 1012

  /// Whether a code received in a close frame is acceptable.
  ///
  /// | range       | verdict | why |
  /// |-------------|---------|-----|
  /// | 0–999       | invalid | "not used" (§7.4.2) |
  /// | 1000–1003   | valid   | defined in §7.4.1 |
  /// | 1004        | invalid | reserved, meaning undefined (§7.4.1) |
  /// | 1005, 1006  | invalid | MUST NOT be set in a close frame (§7.4.1) |
  /// | 1007–1011   | valid   | defined in §7.4.1 (1011 added by IANA) |
  /// | 1012–1014   | valid   | IANA-registered: service restart, try again later, bad gateway |
  /// | 1015        | invalid | TLS failure marker, MUST NOT be sent (§7.4.1) |
  /// | 1016–2999   | invalid | reserved for future RFCs, unassigned |
  /// | 3000–4999   | valid   | libraries/frameworks and private use (§7.4.2) |
  /// | 5000–65535  | invalid | outside every range of §7.4.2 |
  ///
  /// This is the contract's list (PROTOCOL.md §1). The current Autobahn
  /// suite's invalid set (0, 999, 1004–1006, 1016, 1100, 2000, 2999, 5000,
  /// 65535) agrees; old Autobahn releases also listed 1012–1014 as invalid.
  @inlinable
  public static func isValidReceived(_ code: UInt16) -> Bool {
    switch code {
    case 1000...1003, 1007...1014, 3000...4999: return true
    default: return false
    }
  }

  /// What protocol/ §14's "Client should" column says about reconnecting after a
  /// close code; one rule for every client (the Swift client machine, the bots, and
  /// the JavaScript client, whose copy a test compares with this one).
  public enum Reconnect: Sendable, Equatable {
    /// Reconnect with resume after backoff: 1001, 1011, 1012, 4000–4499, and a TCP
    /// end without a close frame (1006, reported as nil).
    case resume
    /// Do not reconnect automatically: 1000 (the client or the relay ended it
    /// cleanly) and the final application range 4500–4999.
    case stop
    /// §14 gives no reconnect rule: protocol errors to fix in the client (1002,
    /// 1003, 1007, 1009), 1008, and codes outside the table. A client that keeps
    /// trying treats it as `resume`; a load bot, which must not hide a bug, stops.
    case unspecified
  }

  /// The final application range (§14): "not reconnect automatically".
  public static let finalApplicationCodes: ClosedRange<UInt16> = 4500...4999
  /// The temporary application range (§14): "reconnect with resume, after backoff".
  public static let temporaryApplicationCodes: ClosedRange<UInt16> = 4000...4499

  /// The §14 rule for `code`; nil is a connection that ended without a close frame.
  public static func reconnect(after code: UInt16?) -> Reconnect {
    guard let code else { return .resume }
    switch code {
    case normal, finalApplicationCodes: return .stop
    case goingAway, internalError, serviceRestart, temporaryApplicationCodes: return .resume
    default: return .unspecified
    }
  }

  /// Whether a client stops reconnecting after `code` (§14: 1000 and 4500–4999).
  public static func endsReconnecting(_ code: UInt16?) -> Bool { reconnect(after: code) == .stop }
}
