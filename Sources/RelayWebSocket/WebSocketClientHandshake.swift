// The client side of the opening handshake (RFC 6455 §4.1), for the load
// bots: build the upgrade request, then check the server's 101 response.
import RelayPrimitives

/// Builds upgrade requests and validates the server's answer.
public enum WebSocketClientHandshake {
  /// The upgrade request (§4.1 items 1–9). `key` must be 16 random bytes,
  /// fresh per connection (§4.1 item 7; the shell draws them from OpenSSL).
  /// Returns the request bytes and the `Sec-WebSocket-Key` value sent.
  public static func request(
    host: String, target: String, key: [UInt8], subprotocols: [String] = [],
    extraHeaders: [(String, String)] = []
  ) -> (bytes: [UInt8], key: String) {
    precondition(key.count == 16, "Sec-WebSocket-Key must encode 16 bytes")
    let keyText = Base64.encode(key)
    var text = "GET \(target) HTTP/1.1\r\nHost: \(host)\r\nUpgrade: websocket\r\n"
    text += "Connection: Upgrade\r\nSec-WebSocket-Key: \(keyText)\r\n"
    text += "Sec-WebSocket-Version: 13\r\n"
    if !subprotocols.isEmpty {
      text += "Sec-WebSocket-Protocol: \(subprotocols.joined(separator: ", "))\r\n"
    }
    for (name, value) in extraHeaders { text += "\(name): \(value)\r\n" }
    text += "\r\n"
    return (Array(text.utf8), keyText)
  }

  /// What the server answered.
  public enum Outcome: Sendable, Equatable {
    /// Not a complete response head yet.
    case needMore
    /// Upgraded. `leftover` are bytes after the head (frames the server
    /// sent right away): feed them to the connection first.
    case accepted(subprotocol: String?, leftover: [UInt8])
    /// Not upgraded: the status, or 0 when the response is malformed or
    /// breaks §4.1's checks (bad accept value, wrong headers, unoffered
    /// subprotocol, any extension).
    case refused(status: Int, reason: String)
  }

  /// Checks the response accumulated so far in `received` (§4.1, "the
  /// client MUST validate the server's response"). Call again with more
  /// bytes while it says `.needMore`; the head is limited to `maxHeadBytes`.
  public static func evaluateResponse(
    _ received: [UInt8], key: String, offeredSubprotocols: [String] = [],
    maxHeadBytes: Int = 8192, sha1: ([UInt8]) -> [UInt8]
  ) -> Outcome {
    guard let end = headEnd(received) else {
      return received.count > maxHeadBytes
        ? .refused(status: 0, reason: "head too large") : .needMore
    }
    let lines = received[..<(end - 4)].split(
      separator: UInt8(ascii: "\n"), omittingEmptySubsequences: false
    )
    .map { String(decoding: $0.last == UInt8(ascii: "\r") ? $0.dropLast() : $0, as: UTF8.self) }
    guard let status = statusCode(lines[0]) else {
      return .refused(status: 0, reason: "bad status line")
    }
    guard status == 101 else { return .refused(status: status, reason: "not upgraded") }
    var headers: [(name: String, value: String)] = []
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else {
        return .refused(status: 0, reason: "bad header")
      }
      headers.append(
        (String(line[..<colon]), line[line.index(after: colon)...].trimmingSpaces()))
    }
    let head = HTTPRequestHead(method: "", target: "/", versionMinor: 1, headers: headers)
    if let problem = problem(head, key: key, offered: offeredSubprotocols, sha1: sha1) {
      return .refused(status: 0, reason: problem)
    }
    return .accepted(
      subprotocol: head.header("Sec-WebSocket-Protocol"), leftover: Array(received[end...]))
  }

  /// The first §4.1 response check that fails, or nil.
  static func problem(
    _ head: HTTPRequestHead, key: String, offered: [String], sha1: ([UInt8]) -> [UInt8]
  ) -> String? {
    if !head.headerContainsToken("Upgrade", "websocket") { return "Upgrade is not websocket" }
    if !head.headerContainsToken("Connection", "upgrade") { return "Connection lacks upgrade" }
    let accept = head.header("Sec-WebSocket-Accept")
    if accept != WebSocketHandshake.acceptValue(forKey: key, sha1: sha1) {
      return "wrong Sec-WebSocket-Accept"
    }
    if head.headerCount("Sec-WebSocket-Extensions") > 0 { return "unrequested extension" }
    if let chosen = head.header("Sec-WebSocket-Protocol"), !offered.contains(chosen) {
      return "unoffered subprotocol"
    }
    return nil
  }

  /// "HTTP/1.x NNN reason" → NNN.
  static func statusCode(_ line: String) -> Int? {
    let parts = line.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: false)
    guard parts.count >= 2, parts[0] == "HTTP/1.1" || parts[0] == "HTTP/1.0",
      parts[1].count == 3, let code = Int(parts[1])
    else { return nil }
    return code
  }

  /// Index just past the first "\r\n\r\n".
  static func headEnd(_ bytes: [UInt8]) -> Int? {
    guard bytes.count >= 4 else { return nil }
    for i in 0...(bytes.count - 4)
    where bytes[i] == .cr && bytes[i + 1] == .lf && bytes[i + 2] == .cr && bytes[i + 3] == .lf {
      return i + 4
    }
    return nil
  }
}
