// Where the bots connect, and their tokens (§3).

import RelayCrypto
import RelayProtocol

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
