// The bots' side of the RFC 6455 §4.1 opening handshake: where to connect, and
// the handshake itself, delegated to RelayWebSocket's `WebSocketClientHandshake`.

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

/// One pending opening handshake, built and checked by RelayWebSocket's
/// `WebSocketClientHandshake` (the one client-side handshake of the package, shared
/// with the RelayClient SDK): the request bytes, and a buffer for the response head
/// until its blank line arrives. Runs once per connection, off the measured path.
struct ClientHandshake {
  let key: String
  let request: [UInt8]
  private let offered: [String]
  private var head: [UInt8] = []

  enum Outcome {
    case needMore
    /// Upgraded; `rest` are bytes after the head (already WebSocket frames).
    case upgraded(rest: [UInt8])
    case failed(String)
  }

  init(host: String, port: Int, path: String, subprotocol: String?) {
    offered = subprotocol.map { [$0] } ?? []
    let built = WebSocketClientHandshake.request(
      host: "\(host):\(port)", target: path, key: Crypto.randomBytes(16), subprotocols: offered)
    key = built.key
    request = built.bytes
  }

  /// Feeds response bytes; returns the outcome once the head is complete (RFC 6455
  /// §4.1: status 101, the accept value derived from our key, no unoffered
  /// subprotocol or extension).
  mutating func receive(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    head.append(contentsOf: bytes)
    switch WebSocketClientHandshake.evaluateResponse(
      head, key: key, offeredSubprotocols: offered, sha1: { Crypto.sha1($0) })
    {
    case .needMore: return .needMore
    case .accepted(_, let leftover): return .upgraded(rest: leftover)
    case .refused(let status, let reason):
      return .failed(status == 0 ? reason : "upgrade refused: \(status) \(reason)")
    }
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
