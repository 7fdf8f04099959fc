import Foundation
import RelayCrypto
import RelayProtocol
import RelayPrimitives
import TestSupport
import Testing

/// A PEM key made by the `openssl` command, as an operator (or Apple, or Google) makes one.
func generatedKey(_ arguments: [String]) throws -> String {
  let path = FileManager.default.temporaryDirectory.appendingPathComponent("relay-key-\(UUID().uuidString).pem").path
  defer { try? FileManager.default.removeItem(atPath: path) }
  let p = Process()
  p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
  p.arguments = arguments + ["-out", path]
  p.standardOutput = FileHandle.nullDevice
  p.standardError = FileHandle.nullDevice
  // genrsa takes the size last, after the output file.
  if arguments.first == "genrsa" { p.arguments?.append("2048") }
  try p.run()
  p.waitUntilExit()
  return try String(contentsOfFile: path, encoding: .utf8)
}

@Suite("RelayCrypto: ES256 / RS256 signing")
struct SigningTests {
  @Test("ES256 with a PKCS#8 P-256 key: 64-byte r||s that the public key verifies, and only for that message")
  func es256() throws {
    let key = try SigningKey(pem: try String(contentsOfFile: TestCertificate.make("ec").key, encoding: .utf8))
    #expect(key.algorithm == .es256)
    let message = Array("header.claims".utf8)
    let signature = key.sign(message)
    #expect(signature.count == 64)
    #expect(key.verify(signature, message: message))
    #expect(!key.verify(signature, message: Array("header.claimz".utf8)))
    var flipped = signature
    flipped[40] ^= 1
    #expect(!key.verify(flipped, message: message))
    #expect(!key.verify(Array(signature.prefix(63)), message: message))
    // ECDSA draws a fresh nonce per signature: two signatures differ, both verify.
    let again = key.sign(message)
    #expect(again != signature && key.verify(again, message: message))
  }

  @Test("RS256 with an RSA 2048 key, PKCS#8 and traditional PEM")
  func rs256() throws {
    let commands = [["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], ["genrsa", "-traditional"]]
    for command in commands {
      let pem = try generatedKey(command)
      let key = try SigningKey(pem: pem)
      #expect(key.algorithm == .rs256)
      let signature = key.sign(Array("x".utf8))
      #expect(signature.count == 256)
      #expect(key.sign(Array("x".utf8)) == signature)  // PKCS#1 v1.5 is deterministic
      #expect(key.verify(signature, message: Array("x".utf8)))
      #expect(!key.verify(signature, message: Array("y".utf8)))
    }
  }

  @Test("keys that cannot sign ES256/RS256 are refused with a reason")
  func refusedKeys() throws {
    let p384 = try generatedKey(["genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-384"])
    #expect(throws: SigningKey.LoadError.self) { try SigningKey(pem: p384) }
    let ed25519 = try generatedKey(["genpkey", "-algorithm", "ED25519"])
    #expect(throws: SigningKey.LoadError.self) { try SigningKey(pem: ed25519) }
    let cert = try String(contentsOfFile: TestCertificate.make("ec").cert, encoding: .utf8)
    for bad in ["", "not a key", cert, "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"] {
      #expect(throws: SigningKey.LoadError.self) { try SigningKey(pem: bad) }
    }
  }

  @Test("an ES256 JWT: header and claims as written, signature over the signing input (RFC 7515 §7.1)")
  func es256JWT() throws {
    let key = try SigningKey(pem: try String(contentsOfFile: TestCertificate.make("ec").key, encoding: .utf8))
    var header = JSONObject()
    header.append("alg", .string("ES256"))
    header.append("kid", .string("ABC123DEFG"))
    var claims = JSONObject()
    claims.append("iss", .string("DEF123GHIJ"))
    claims.append("iat", .number(JSONNumber(Int64(1_700_000_000))))
    let token = JWT.sign(header: header, claims: claims, signature: key.sign)
    let parts = token.split(separator: ".").map(String.init)
    #expect(parts.count == 3)
    #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
    #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == #"{"iss":"DEF123GHIJ","iat":1700000000}"#)
    let signature = try #require(Base64URL.decode(parts[2]))
    #expect(key.verify(signature, message: Array((parts[0] + "." + parts[1]).utf8)))
  }
}
