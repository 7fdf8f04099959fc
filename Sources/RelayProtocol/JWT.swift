// JWT HS256 (RFC 7519 / RFC 7515) with the HMAC injected, so this module stays free
// of OpenSSL (DESIGN.md, "Layers"). Rules of PROTOCOL.md §3.
import RelayPrimitives

/// HMAC-SHA256(key, message) → 32 bytes. Production: RelayCrypto; tests: their own.
public typealias HMACFunction = @Sendable (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]
/// Constant-time byte comparison (signature check must not leak timing).
public typealias ConstantTimeEquals = @Sendable (_ a: [UInt8], _ b: [UInt8]) -> Bool

/// Why a token was refused. Every case closes the connection with 4501 (§3).
public enum JWTError: Error, Sendable, Equatable {
  case malformed
  case unsupportedAlgorithm
  case badSignature
  case missingSubject
  case missingExpiry
  case expired
  case notYetValid
  case invalidClaim(String)
}

/// Verifies tokens signed with one secret.
public struct JWTVerifier: Sendable {
  public let secret: [UInt8]
  public let hmac: HMACFunction
  public let equals: ConstantTimeEquals
  /// §3: 30 000 ms of leeway on both `exp` and `nbf`.
  public var leewayMs: Int64 = 30_000

  public init(secret: [UInt8], hmac: @escaping HMACFunction, equals: @escaping ConstantTimeEquals) {
    self.secret = secret
    self.hmac = hmac
    self.equals = equals
  }

  /// Checks signature, algorithm and times (`nowWallMs`: Unix ms) and returns the
  /// identity the claims describe.
  public func verify(_ token: String, nowWallMs: Int64) -> Result<Identity, JWTError> {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let headerBytes = Base64URL.decode(parts[0]),
      let payloadBytes = Base64URL.decode(parts[1]), let signature = Base64URL.decode(parts[2]),
      let header = (try? JSONParser.parse(headerBytes))?.objectValue,
      let claims = (try? JSONParser.parse(payloadBytes))?.objectValue
    else { return .failure(.malformed) }
    // RFC 8725 §3.1: accept exactly the one expected algorithm, `none` never.
    guard header["alg"]?.stringValue == "HS256" else { return .failure(.unsupportedAlgorithm) }
    let signingInput = Array(token.utf8.prefix(parts[0].utf8.count + 1 + parts[1].utf8.count))
    guard equals(hmac(secret, signingInput), signature) else { return .failure(.badSignature) }
    return JWTClaimsReader(claims: claims, nowWallMs: nowWallMs, leewayMs: leewayMs).identity()
  }
}

/// Claim checks of §3, separate from the signature work.
struct JWTClaimsReader {
  let claims: JSONObject
  let nowWallMs: Int64
  let leewayMs: Int64

  func identity() -> Result<Identity, JWTError> {
    guard let sub = claims["sub"]?.stringValue, !sub.isEmpty else { return .failure(.missingSubject) }
    guard let exp = claims["exp"] else { return .failure(.missingExpiry) }
    guard let expMs = milliseconds(exp) else { return .failure(.invalidClaim("exp")) }
    guard Double(nowWallMs) <= expMs + Double(leewayMs) else { return .failure(.expired) }
    // `iat` is informational (RFC 7519 §4.1.6) but, when present, held to the same range.
    if let iat = claims["iat"], !iat.isNull, milliseconds(iat) == nil { return .failure(.invalidClaim("iat")) }
    if let nbf = claims["nbf"], !nbf.isNull {
      guard let nbfMs = milliseconds(nbf) else { return .failure(.invalidClaim("nbf")) }
      guard nbfMs <= Double(nowWallMs) + Double(leewayMs) else { return .failure(.notYetValid) }
    }
    return optionalClaims(sub: sub, expMs: expMs)
  }

  /// NumericDate seconds (RFC 7519 §2, fractions allowed) → ms; nil unless within
  /// 0...`JWT.maxNumericDateSeconds` (so always exact enough and inside Int64 as ms).
  func milliseconds(_ value: JSONValue) -> Double? {
    guard let seconds = value.numberValue?.double, seconds.isFinite,
      seconds >= 0, seconds <= Double(JWT.maxNumericDateSeconds)
    else { return nil }
    return seconds * 1000
  }

  func optionalClaims(sub: String, expMs: Double) -> Result<Identity, JWTError> {
    var identity = Identity(uid: sub, name: sub)
    identity.expiresAtMs = Int64(expMs)  // within range: see `milliseconds`
    switch claims["name"] {
    case nil, .null?: break
    case .string(let name)?: identity.name = name
    default: return .failure(.invalidClaim("name"))
    }
    switch claims["avatar"] {
    case nil, .null?: break
    case .string(let avatar)?: identity.avatar = avatar
    default: return .failure(.invalidClaim("avatar"))
    }
    switch claims["role"] {
    case nil, .null?: break
    case .string(let text)?:
      guard let role = Role(rawValue: text) else { return .failure(.invalidClaim("role")) }
      identity.role = role
    default: return .failure(.invalidClaim("role"))
    }
    guard let grant = sessionGrant() else { return .failure(.invalidClaim("sessions")) }
    identity.sessions = grant
    return .success(identity)
  }

  /// `sessions`: absent → none; `["*"]` (any element "*") → any; else the listed ids.
  func sessionGrant() -> SessionGrant? {
    switch claims["sessions"] {
    case nil, .null?: return .only([])
    case .array(let elements)?:
      var ids: [String] = []
      for element in elements {
        guard let id = element.stringValue else { return nil }
        if id == "*" { return .any }
        ids.append(id)
      }
      return .only(ids)
    default: return nil
    }
  }
}

/// Token issuing (admin `POST /v1/tokens`, `relay token`).
public enum JWT {
  /// The latest NumericDate accepted (and minted): 9999-12-31T23:59:59Z. Anything
  /// later is not a time a token issuer means (milliseconds written as seconds,
  /// 1e30, 2^63) and must not read as "never expires" (§3.1).
  public static let maxNumericDateSeconds: Int64 = 253_402_300_799

  /// The claims object of §3, members in a fixed order. Times in NumericDate seconds.
  public static func claims(
    sub: String, name: String? = nil, avatar: String? = nil, sessions: [String]? = nil,
    role: Role? = nil, issuedAtSeconds: Int64, expiresAtSeconds: Int64
  ) -> JSONObject {
    var object = JSONObject()
    object.append("sub", .string(sub))
    if let name { object.append("name", .string(name)) }
    if let avatar { object.append("avatar", .string(avatar)) }
    if let sessions { object.append("sessions", .array(sessions.map { .string($0) })) }
    if let role { object.append("role", .string(role.rawValue)) }
    object.append("iat", .number(JSONNumber(issuedAtSeconds)))
    object.append("exp", .number(JSONNumber(expiresAtSeconds)))
    return object
  }

  /// Compact JWS: base64url(header).base64url(claims).base64url(HMAC).
  public static func sign(claims: JSONObject, secret: [UInt8], hmac: HMACFunction) -> String {
    var header = JSONObject()
    header.append("alg", .string("HS256"))
    header.append("typ", .string("JWT"))
    return sign(header: header, claims: claims) { hmac(secret, $0) }
  }

  /// Compact JWS (RFC 7515 §7.1) with any algorithm: `signature` gets the signing
  /// input `base64url(header).base64url(claims)` and returns the JWS signature bytes
  /// (HS256 here; ES256 and RS256 keys from RelayCrypto for push providers).
  public static func sign(header: JSONObject, claims: JSONObject, signature: ([UInt8]) -> [UInt8]) -> String {
    let signingInput =
      Base64URL.encode(JSONValue.object(header).encoded()) + "." + Base64URL.encode(JSONValue.object(claims).encoded())
    return signingInput + "." + Base64URL.encode(signature(Array(signingInput.utf8)))
  }
}
