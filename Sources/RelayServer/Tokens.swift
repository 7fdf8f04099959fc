public import RelayProtocol
import RelayCrypto

/// JWT issuing and checking with OpenSSL's HMAC injected into the pure JWT code.
public enum Tokens {
  /// The verifier the core calls for `hello.token` (nil → close 4501). In dev mode
  /// there is no secret and every token is refused: only `hello.dev` is accepted.
  public static func verifier(secret: String?) -> (String, Int64) -> Identity? {
    guard let secret else { return { _, _ in nil } }
    let jwt = JWTVerifier(
      secret: Array(secret.utf8), hmac: { Crypto.hmacSHA256(key: $0, message: $1) },
      equals: { Crypto.constantTimeEqual($0, $1) })
    return { token, nowWallMs in
      if case .success(let identity) = jwt.verify(token, nowWallMs: nowWallMs) { return identity }
      return nil
    }
  }

  /// Signs a token (admin `POST /v1/tokens`, `relay token`). `ttlMs` per contract §10.
  public static func mint(
    secret: String, sub: String, name: String? = nil, avatar: String? = nil,
    sessions: [String]? = nil, role: Role? = nil, ttlMs: Int64, nowWallMs: Int64
  ) -> String {
    let iat = nowWallMs / 1000
    let exp = (nowWallMs + ttlMs) / 1000
    let claims = JWT.claims(
      sub: sub, name: name, avatar: avatar, sessions: sessions, role: role,
      issuedAtSeconds: iat, expiresAtSeconds: max(exp, iat))
    return JWT.sign(claims: claims, secret: Array(secret.utf8)) { Crypto.hmacSHA256(key: $0, message: $1) }
  }
}
