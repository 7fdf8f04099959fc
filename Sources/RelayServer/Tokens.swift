public import RelayProtocol
import RelayCrypto

/// JWT issuing and checking with OpenSSL's HMAC injected into the pure JWT code.
public enum Tokens {
  /// The longest lifetime a minted token may have: ten years in ms. Anything longer is
  /// refused (HTTP 400, CLI error) rather than clamped, so a typo is not a token that
  /// never expires; it also keeps `now + ttl` far from Int64 overflow.
  public static let maxTTLMs: Int64 = 10 * 365 * 86_400_000
  /// Lifetime when the request gives none: one hour.
  public static let defaultTTLMs: Int64 = 3_600_000

  /// Why a requested lifetime is refused.
  public static let ttlRule = "ttl must be an integer number of ms in 1...\(maxTTLMs)"

  /// The requested lifetime if it is an integer literal in `1...maxTTLMs`; nil for a
  /// fraction (`1.5`), an exponent (`1e3`), a value out of range or a non-number.
  public static func validTTL(_ value: JSONValue) -> Int64? {
    guard let ms = value.numberValue?.int64, (1...maxTTLMs).contains(ms) else { return nil }
    return ms
  }

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

  /// Signs a token (admin `POST /v1/tokens`, `relay token`). `ttlMs` per contract §10;
  /// callers validate it with `validTTL`, and the sum saturates anyway so no input can
  /// trap here.
  public static func mint(
    secret: String, sub: String, name: String? = nil, avatar: String? = nil,
    sessions: [String]? = nil, role: Role? = nil, ttlMs: Int64, nowWallMs: Int64
  ) -> String {
    // Clamped to the NumericDates a verifier accepts (§3.1), so a saturated
    // lifetime still mints a valid token.
    let iat = min(nowWallMs / 1000, JWT.maxNumericDateSeconds)
    let (sum, overflow) = nowWallMs.addingReportingOverflow(max(ttlMs, 0))
    let exp = min((overflow ? Int64.max : sum) / 1000, JWT.maxNumericDateSeconds)
    let claims = JWT.claims(
      sub: sub, name: name, avatar: avatar, sessions: sessions, role: role,
      issuedAtSeconds: iat, expiresAtSeconds: max(exp, iat))
    return JWT.sign(claims: claims, secret: Array(secret.utf8)) { Crypto.hmacSHA256(key: $0, message: $1) }
  }
}
