// The client side of the RFC 6455 §4.1 opening handshake, which RelayWebSocket
// leaves to us: build the GET request, then read the server's response head
// and verify the 101 with its Sec-WebSocket-Accept.

import RelayCrypto
import RelayWebSocket

/// Where to connect, parsed from `ws://HOST:PORT/PATH`.
struct WebSocketURL {
  var host: String
  var port: Int
  var path: String

  init?(_ text: String) {
    guard text.hasPrefix("ws://") else { return nil }
    let rest = text.dropFirst(5)
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let authority = rest[..<slash]
    path = slash == rest.endIndex ? "/" : String(rest[slash...])
    if let colon = authority.lastIndex(of: ":") {
      host = String(authority[..<colon])
      guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
    } else {
      host = String(authority)
      port = 80
    }
    if host == "localhost" { host = "127.0.0.1" }
    guard !host.isEmpty else { return nil }
  }

  /// The local address bot `index` connects from: against 127.0.0.1, one of eight
  /// loopback addresses in turn, so 20 000 bots never crowd one source address's
  /// ephemeral ports (see EventLoop's SourceAddress.swift); otherwise the kernel's choice.
  func source(forBot index: Int) -> String? {
    host == "127.0.0.1" ? "127.0.0.\(1 + index % 8)" : nil
  }
}

/// One pending opening handshake: the request bytes, and a buffer for the
/// response head until its blank line arrives.
struct ClientHandshake {
  let key: String
  let request: [UInt8]
  private var head: [UInt8] = []
  private static let maxHead = 8_192

  enum Outcome {
    case needMore
    /// Upgraded; `rest` are bytes after the head (already WebSocket frames).
    case upgraded(rest: [UInt8])
    case failed(String)
  }

  init(host: String, port: Int, path: String, subprotocol: String?) {
    key = Crypto.base64Encode(Crypto.randomBytes(16))
    var text = "GET \(path) HTTP/1.1\r\nHost: \(host):\(port)\r\nUpgrade: websocket\r\n"
    text += "Connection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n"
    if let subprotocol { text += "Sec-WebSocket-Protocol: \(subprotocol)\r\n" }
    request = Array((text + "\r\n").utf8)
  }

  /// Feeds response bytes; returns the outcome once the head is complete.
  mutating func receive(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    let before = head.count
    head.append(contentsOf: bytes)
    guard let end = headEnd(searchFrom: max(0, before - 3)) else {
      return head.count > Self.maxHead ? .failed("response head over \(Self.maxHead) bytes") : .needMore
    }
    let text = String(decoding: head[..<end], as: UTF8.self)
    let rest = Array(head[(end + 4)...])
    if let problem = validate(text) { return .failed(problem) }
    return .upgraded(rest: rest)
  }

  private func headEnd(searchFrom start: Int) -> Int? {
    guard head.count >= 4 else { return nil }
    var i = start
    while i + 3 < head.count {
      if head[i] == 13, head[i + 1] == 10, head[i + 2] == 13, head[i + 3] == 10 { return i }
      i += 1
    }
    return nil
  }

  /// RFC 6455 §4.1: status 101 and the accept value derived from our key.
  private func validate(_ text: String) -> String? {
    let lines = text.split(separator: "\r\n", omittingEmptySubsequences: false)
    guard let status = lines.first, status.hasPrefix("HTTP/1.1 101") else {
      return "upgrade refused: \(lines.first ?? "")"
    }
    let expected = WebSocketHandshake.acceptValue(forKey: key, sha1: { Crypto.sha1($0) })
    for line in lines.dropFirst() {
      guard let colon = line.firstIndex(of: ":") else { continue }
      let name = line[..<colon].lowercased()
      let value = line[line.index(after: colon)...].trimmingSpaces()
      if name == "sec-websocket-accept" { return value == expected ? nil : "bad Sec-WebSocket-Accept" }
    }
    return "no Sec-WebSocket-Accept"
  }
}

extension Substring {
  fileprivate func trimmingSpaces() -> String {
    var s = self[...]
    while s.first == " " || s.first == "\t" { s = s.dropFirst() }
    while s.last == " " || s.last == "\t" { s = s.dropLast() }
    return String(s)
  }
}

/// Mints HS256 JWTs for the bots (§3) when the run has `--secret`.
struct TokenMinter {
  let secret: [UInt8]

  func token(uid: String, name: String, role: String, nowSeconds: Int, ttlSeconds: Int = 3_600) -> String {
    var header = JsonWriter()
    header.raw("{\"alg\":\"HS256\",\"typ\":\"JWT\"}")
    var claims = JsonWriter()
    claims.raw("{\"sub\":")
    claims.string(uid)
    claims.raw(",\"name\":")
    claims.string(name)
    claims.raw(",\"role\":")
    claims.string(role)
    claims.raw(",\"sessions\":[\"*\"],\"iat\":")
    claims.int(nowSeconds)
    claims.raw(",\"exp\":")
    claims.int(nowSeconds + ttlSeconds)
    claims.raw("}")
    let signingInput = Crypto.base64URLEncode(header.bytes) + "." + Crypto.base64URLEncode(claims.bytes)
    let mac = Crypto.hmacSHA256(key: secret, message: Array(signingInput.utf8))
    return signingInput + "." + Crypto.base64URLEncode(mac)
  }
}
