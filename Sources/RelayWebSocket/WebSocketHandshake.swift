// The server side of the opening handshake (RFC 6455 §4.2).
import RelayPrimitives

/// What to answer an upgrade request with.
public enum HandshakeResult: Sendable {
  /// Send `response` (101); the connection then speaks WebSocket.
  case accept(response: [UInt8], subprotocol: String?)
  /// Send `response` (which says `Connection: close`) and close.
  case reject(status: Int, response: [UInt8])
}

/// Validates upgrade requests and builds the 101 response.
///
/// Status choices, checked in this order:
/// - method not GET → 405 with `Allow: GET` (§4.1 item 2 requires GET);
/// - HTTP/1.0 → 400 (§4.1 item 2 requires HTTP/1.1 or higher);
/// - no `Host`, or more than one → 400 (§4.1 item 4; RFC 7230 §5.4);
/// - no `Upgrade` field at all → 426 with `Upgrade: websocket` (a plain GET
///   on a WebSocket endpoint; RFC 7231 §6.5.15 says how to upgrade);
///   `Upgrade` without the `websocket` token → 400 (§4.2.1 item 3);
/// - `Connection` without the `upgrade` token → 400 (§4.2.1 item 4);
/// - `Sec-WebSocket-Version` missing, repeated or not exactly 13 → 426 with
///   `Sec-WebSocket-Version: 13` (§4.2.2 item 4);
/// - `Sec-WebSocket-Key` missing, repeated or not Base64 of 16 bytes → 400
///   (§4.2.1 item 5);
/// - offered subprotocols none of which is supported, when refusing such
///   offers → 400 (PROTOCOL.md §1).
/// `Sec-WebSocket-Extensions` is ignored: no extension is negotiated, so the
/// RSV bits stay reserved (§9.1).
public enum WebSocketHandshake {
  /// The GUID of §1.3 / §4.2.2 that the accept value hashes with the key.
  public static let guid = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

  /// Decides the handshake. `sha1` must return the 20-byte SHA-1 digest.
  /// The first of the client's offered subprotocols (its preference order,
  /// §4.1) that appears in `supportedSubprotocols` is selected.
  public static func evaluate(
    _ head: HTTPRequestHead, supportedSubprotocols: [String], refuseUnsupportedOffer: Bool,
    sha1: ([UInt8]) -> [UInt8]
  ) -> HandshakeResult {
    if let rejection = checkRequest(head) { return rejection }
    let offered = head.headerValues("Sec-WebSocket-Protocol")
    let selected = offered.first { supportedSubprotocols.contains($0) }
    if selected == nil && !offered.isEmpty && refuseUnsupportedOffer {
      return reject(400, "none of the offered subprotocols is supported")
    }
    let key = head.header("Sec-WebSocket-Key")!
    return .accept(
      response: switchingProtocols(
        accept: acceptValue(forKey: key, sha1: sha1), subprotocol: selected),
      subprotocol: selected)
  }

  /// Sec-WebSocket-Accept (§4.2.2 item 5.4): Base64 of the SHA-1 of the key
  /// (as sent, trimmed) concatenated with the GUID.
  public static func acceptValue(forKey key: String, sha1: ([UInt8]) -> [UInt8]) -> String {
    Base64.encode(sha1(Array((key + guid).utf8)))
  }

  /// The first rule the request breaks, as a ready rejection, or nil.
  static func checkRequest(_ head: HTTPRequestHead) -> HandshakeResult? {
    if head.method != "GET" {
      return reject(405, "WebSocket upgrades use GET", headers: [("Allow", "GET")])
    }
    if head.versionMinor < 1 { return reject(400, "WebSocket needs HTTP/1.1") }
    if head.headerCount("Host") != 1 { return reject(400, "exactly one Host header is required") }
    if let rejection = checkUpgradeFields(head) { return rejection }
    let versions = head.headerValues("Sec-WebSocket-Version")
    if versions != ["13"] {
      return reject(
        426, "unsupported WebSocket version", headers: [("Sec-WebSocket-Version", "13")])
    }
    let keys = head.headers.filter { HTTPRequestHead.namesEqual($0.name, "Sec-WebSocket-Key") }
    guard keys.count == 1, Base64.decode(keys[0].value)?.count == 16 else {
      return reject(400, "Sec-WebSocket-Key must be Base64 of 16 bytes")
    }
    return nil
  }

  /// `Upgrade: websocket` and `Connection: upgrade` (§4.2.1 items 3, 4).
  static func checkUpgradeFields(_ head: HTTPRequestHead) -> HandshakeResult? {
    if head.headerCount("Upgrade") == 0 {
      return reject(
        426, "this endpoint speaks WebSocket",
        headers: [("Upgrade", "websocket"), ("Connection", "Upgrade")])
    }
    if !head.headerContainsToken("Upgrade", "websocket") {
      return reject(400, "Upgrade must contain websocket")
    }
    if !head.headerContainsToken("Connection", "upgrade") {
      return reject(400, "Connection must contain upgrade")
    }
    return nil
  }

  static func reject(
    _ status: Int, _ message: String, headers: [(String, String)] = []
  ) -> HandshakeResult {
    let response = HTTPResponse.make(
      status: status, headers: headers + [("Content-Type", "text/plain; charset=utf-8")],
      body: Array((message + "\n").utf8), close: true)
    return .reject(status: status, response: response)
  }

  /// The 101 response (§4.2.2 item 5).
  static func switchingProtocols(accept: String, subprotocol: String?) -> [UInt8] {
    var text =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      + "Sec-WebSocket-Accept: \(accept)\r\n"
    if let subprotocol { text += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
    text += "\r\n"
    return Array(text.utf8)
  }
}
