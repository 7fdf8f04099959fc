// §3 JWT HS256: sign/verify round trip, the JWT.io example, and each rejection.
import Testing

@testable import RelayProtocol
import RelayCrypto
import RelayPrimitives

let secret = Array("test-secret".utf8)
let hmac: HMACFunction = { Crypto.hmacSHA256(key: $0, message: $1) }
let testEquals: ConstantTimeEquals = { Crypto.constantTimeEqual($0, $1) }
let verifier = JWTVerifier(secret: secret, hmac: hmac, equals: testEquals)
let nowMs: Int64 = 1_700_000_000_000
let nowS: Int64 = 1_700_000_000

/// Signs arbitrary header and claims JSON texts (for hostile tokens).
func rawToken(header: String, claims: String, key: [UInt8] = secret) -> String {
  let input = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
  return input + "." + Base64URL.encode(hmac(key, Array(input.utf8)))
}

func token(_ claims: String) -> String { rawToken(header: #"{"alg":"HS256","typ":"JWT"}"#, claims: claims) }

@Suite struct JWTTests {
  @Test func jwtIoExampleSignatureChecksButLacksExp() {
    let example = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIiwibmFtZSI6IkpvaG4gRG9lIiwiaWF0IjoxNTE2MjM5MDIyfQ.SflKxwRJSMeKKF2QT4fwpMeJf36POk6yJV_adQssw5c"
    let jwtio = JWTVerifier(secret: Array("your-256-bit-secret".utf8), hmac: hmac, equals: testEquals)
    #expect(jwtio.verify(example, nowWallMs: nowMs) == .failure(.missingExpiry))  // signature passed
    #expect(verifier.verify(example, nowWallMs: nowMs) == .failure(.badSignature))
  }

  @Test func signVerifyRoundTrip() {
    let claims = JWT.claims(
      sub: "alice", name: "Alice", avatar: "https://a/x.png", sessions: ["s1", "s2"], role: .host,
      issuedAtSeconds: nowS, expiresAtSeconds: nowS + 3600)
    let signed = JWT.sign(claims: claims, secret: secret, hmac: hmac)
    #expect(verifier.verify(signed, nowWallMs: nowMs) == .success(Identity(
      uid: "alice", name: "Alice", avatar: "https://a/x.png", role: .host, sessions: .only(["s1", "s2"]),
      expiresAtMs: (nowS + 3600) * 1000)))
  }

  @Test func defaultsAndWildcard() {
    let minimal = verifier.verify(token(#"{"sub":"u","exp":\#(nowS + 10)}"#), nowWallMs: nowMs)
    #expect(minimal == .success(Identity(uid: "u", name: "u", role: .participant, sessions: .only([]), expiresAtMs: (nowS + 10) * 1000)))
    let any = verifier.verify(token(#"{"sub":"u","exp":\#(nowS + 10),"sessions":["*"]}"#), nowWallMs: nowMs)
    #expect((try? any.get())?.sessions == .any)
  }

  @Test func rejections() {
    let exp = nowS + 60
    let cases: [(String, JWTError)] = [
      (rawToken(header: #"{"alg":"none"}"#, claims: #"{"sub":"u","exp":\#(exp)}"#), .unsupportedAlgorithm),
      (rawToken(header: #"{"alg":"HS512"}"#, claims: #"{"sub":"u","exp":\#(exp)}"#), .unsupportedAlgorithm),
      (rawToken(header: #"{"typ":"JWT"}"#, claims: #"{"sub":"u","exp":\#(exp)}"#), .unsupportedAlgorithm),
      (rawToken(header: #"{"alg":"HS256"}"#, claims: #"{"sub":"u","exp":\#(exp)}"#, key: Array("other".utf8)), .badSignature),
      (token(#"{"exp":\#(exp)}"#), .missingSubject),
      (token(#"{"sub":"","exp":\#(exp)}"#), .missingSubject),
      (token(#"{"sub":7,"exp":\#(exp)}"#), .missingSubject),
      (token(#"{"sub":"u"}"#), .missingExpiry),
      (token(#"{"sub":"u","exp":"tomorrow"}"#), .invalidClaim("exp")),
      (token(#"{"sub":"u","exp":1e400}"#), .invalidClaim("exp")),
      (token(#"{"sub":"u","exp":\#(nowS - 31)}"#), .expired),
      (token(#"{"sub":"u","exp":\#(exp),"nbf":\#(nowS + 31)}"#), .notYetValid),
      (token(#"{"sub":"u","exp":\#(exp),"role":"admin"}"#), .invalidClaim("role")),
      (token(#"{"sub":"u","exp":\#(exp),"sessions":"s1"}"#), .invalidClaim("sessions")),
      (token(#"{"sub":"u","exp":\#(exp),"name":1}"#), .invalidClaim("name")),
      ("a.b", .malformed), ("a.b.c.d", .malformed), ("!!.??.**", .malformed), ("", .malformed),
      (Base64URL.encode(Array("{}".utf8)) + ".e30.", .unsupportedAlgorithm),
    ]
    for (jwt, error) in cases {
      #expect(verifier.verify(jwt, nowWallMs: nowMs) == .failure(error), "\(jwt)")
    }
  }

  @Test func tamperedPayloadFails() {
    let good = token(#"{"sub":"u","exp":\#(nowS + 60)}"#)
    let parts = good.split(separator: ".")
    let forged = Base64URL.encode(Array(#"{"sub":"admin","exp":\#(nowS + 60)}"#.utf8))
    #expect(verifier.verify("\(parts[0]).\(forged).\(parts[2])", nowWallMs: nowMs) == .failure(.badSignature))
  }

  @Test func leewayOf30SecondsOnBothEnds() {
    #expect((try? verifier.verify(token(#"{"sub":"u","exp":\#(nowS - 30)}"#), nowWallMs: nowMs).get()) != nil)
    #expect((try? verifier.verify(token(#"{"sub":"u","exp":\#(nowS + 60),"nbf":\#(nowS + 30)}"#), nowWallMs: nowMs).get()) != nil)
    #expect((try? verifier.verify(token(#"{"sub":"u","exp":\#(nowS + 60),"nbf":\#(nowS)}"#), nowWallMs: nowMs).get()) != nil)
    // Fractional NumericDate.
    #expect((try? verifier.verify(token(#"{"sub":"u","exp":\#(nowS - 30).5}"#), nowWallMs: nowMs + 500).get()) != nil)
    #expect(verifier.verify(token(#"{"sub":"u","exp":\#(nowS - 30).5}"#), nowWallMs: nowMs + 501) == .failure(.expired))
  }

  @Test func base64urlRoundTrip() {
    for length in 0..<70 {
      let bytes = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
      let encoded = Base64URL.encode(bytes)
      #expect(!encoded.contains("=") && !encoded.contains("+") && !encoded.contains("/"))
      #expect(Base64URL.decode(encoded) == bytes)
    }
    #expect(Base64URL.decode("a") == nil)
    #expect(Base64URL.decode("ab==") == nil)
    #expect(Base64URL.decode("a+b/") == nil)
  }
}
