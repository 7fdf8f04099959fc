// Where the bots connect, their opening handshake (RFC 6455 §4.1) and their tokens.

import RelayCrypto
import RelayProtocol
import RelayWebSocket

/// Where to connect, parsed from `ws://HOST:PORT/PATH`.
struct WebSocketURL {
  var host: String
  var port: Int
  var path: String
  /// `wss://`: TLS to the relay (protocol/ §1).
  var secure: Bool
  /// The host as written, for TLS name checks (`host` may have become an IP).
  var serverName: String

  init?(_ text: String) {
    if text.hasPrefix("wss://") {
      secure = true
    } else if text.hasPrefix("ws://") {
      secure = false
    } else {
      return nil
    }
    let rest = text.dropFirst(secure ? 6 : 5)
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let authority = rest[..<slash]
    path = slash == rest.endIndex ? "/" : String(rest[slash...])
    if let colon = authority.lastIndex(of: ":") {
      host = String(authority[..<colon])
      guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
    } else {
      host = String(authority)
      port = secure ? 443 : 80
    }
    serverName = host
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

/// One pending opening handshake (RFC 6455 §4.1), done by RelayWebSocket's
/// `WebSocketClientHandshake`: the request bytes, and the response bytes until their
/// head is complete.
struct ClientHandshake {
  let key: String
  let request: [UInt8]
  private let offered: [String]
  private var received: [UInt8] = []

  enum Outcome {
    case needMore
    /// Upgraded; `rest` are bytes after the head (already WebSocket frames).
    case upgraded(rest: [UInt8])
    case failed(String)
  }

  init(host: String, port: Int, path: String, subprotocol: String?) {
    offered = subprotocol.map { [$0] } ?? []
    (request, key) = WebSocketClientHandshake.request(
      host: "\(host):\(port)", target: path, key: Crypto.randomBytes(16), subprotocols: offered)
  }

  /// Feeds response bytes; returns the outcome once the head is complete.
  mutating func receive(_ bytes: UnsafeRawBufferPointer) -> Outcome {
    received.append(contentsOf: bytes)
    switch WebSocketClientHandshake.evaluateResponse(
      received, key: key, offeredSubprotocols: offered, sha1: { Crypto.sha1($0) })
    {
    case .needMore: return .needMore
    case .accepted(_, let leftover): return .upgraded(rest: leftover)
    case .refused(let status, let reason): return .failed("upgrade refused (\(status)): \(reason)")
    }
  }
}

/// Mints HS256 JWTs for the bots (§3) when the run has `--secret`, with the relay's
/// own JWT code.
struct TokenMinter {
  let secret: [UInt8]

  func token(uid: String, name: String, role: String, nowSeconds: Int, ttlSeconds: Int = 3_600) -> String {
    let claims = JWT.claims(
      sub: uid, name: name, sessions: ["*"], role: Role(rawValue: role),
      issuedAtSeconds: Int64(nowSeconds), expiresAtSeconds: Int64(nowSeconds + ttlSeconds))
    return JWT.sign(claims: claims, secret: secret) { Crypto.hmacSHA256(key: $0, message: $1) }
  }
}
