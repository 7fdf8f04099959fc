import COpenSSL

/// A private key for JWS signatures with a public-key algorithm (RFC 7518 §3.3, §3.4):
/// ES256 with an EC P-256 key (APNs provider tokens are signed with the `.p8` key, a
/// PKCS#8 PEM) and RS256 with an RSA key (a Google service account's `private_key`).
/// Loaded once at start; signing is a pure function of the key and the bytes.
public final class SigningKey: @unchecked Sendable {
  public enum Algorithm: String, Sendable { case es256 = "ES256", rs256 = "RS256" }

  /// Why a PEM cannot be used, for the start-up message (exit 64).
  public struct LoadError: Error, Sendable, CustomStringConvertible {
    public let description: String
  }

  public let algorithm: Algorithm
  private let key: OpaquePointer

  /// Reads a PEM private key (PKCS#8 `PRIVATE KEY`, or the traditional `EC PRIVATE
  /// KEY` / `RSA PRIVATE KEY` forms). An EC key must be on P-256, the only curve
  /// ES256 allows (RFC 7518 §3.4); an RSA key must have at least 2048 bits (§3.3).
  public init(pem: String) throws(LoadError) {
    let bytes = Array(pem.utf8)
    let parsed: OpaquePointer? = bytes.withUnsafeBytes { raw in
      guard let bio = BIO_new_mem_buf(raw.baseAddress, Int32(raw.count)) else { return nil }
      defer { BIO_free(bio) }
      return PEM_read_bio_PrivateKey(bio, nil, nil, nil)
    }
    ERR_clear_error()
    guard let parsed else { throw LoadError(description: "not a PEM private key") }
    switch EVP_PKEY_get_base_id(parsed) {
    case EVP_PKEY_EC:
      guard Self.groupName(parsed) == "prime256v1" else {
        EVP_PKEY_free(parsed)
        throw LoadError(description: "an EC key must be on curve P-256 for ES256")
      }
      algorithm = .es256
    case EVP_PKEY_RSA:
      guard EVP_PKEY_get_bits(parsed) >= 2048 else {
        EVP_PKEY_free(parsed)
        throw LoadError(description: "an RSA key must have at least 2048 bits for RS256")
      }
      algorithm = .rs256
    default:
      EVP_PKEY_free(parsed)
      throw LoadError(description: "the key is neither EC P-256 nor RSA")
    }
    key = parsed
  }

  deinit { EVP_PKEY_free(key) }

  /// The JWS signature of `message` with SHA-256: for ES256 the 64-byte `r || s`
  /// form RFC 7518 §3.4 requires (OpenSSL gives DER, converted here); for RS256
  /// the RSASSA-PKCS1-v1_5 signature (RFC 7518 §3.3).
  public func sign(_ message: [UInt8]) -> [UInt8] {
    let der = digestSign(message)
    guard algorithm == .es256 else { return der }
    guard let joined = ECDSASignature.joined(der: der, width: 32) else {
      preconditionFailure("OpenSSL returned an ECDSA signature that is not DER")
    }
    return joined
  }

  /// Checks a signature made by `sign` with this key's public half (for tests and
  /// self-checks at start).
  public func verify(_ signature: [UInt8], message: [UInt8]) -> Bool {
    var encoded = signature
    if algorithm == .es256 {
      guard let der = ECDSASignature.der(joined: signature) else { return false }
      encoded = der
    }
    guard let context = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
    defer { EVP_MD_CTX_free(context) }
    guard EVP_DigestVerifyInit(context, nil, EVP_sha256(), nil, key) == 1 else { return false }
    let result = encoded.withUnsafeBufferPointer { sig in
      message.withUnsafeBufferPointer { tbs in
        EVP_DigestVerify(context, sig.baseAddress, sig.count, tbs.baseAddress, tbs.count)
      }
    }
    ERR_clear_error()
    return result == 1
  }

  private func digestSign(_ message: [UInt8]) -> [UInt8] {
    guard let context = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
    defer { EVP_MD_CTX_free(context) }
    precondition(EVP_DigestSignInit(context, nil, EVP_sha256(), nil, key) == 1, "EVP_DigestSignInit failed")
    var length = 0
    let input = message.isEmpty ? [0] : message
    let count = message.count
    precondition(
      input.withUnsafeBufferPointer { EVP_DigestSign(context, nil, &length, $0.baseAddress, count) } == 1,
      "EVP_DigestSign (length) failed")
    var signature = [UInt8](repeating: 0, count: length)
    let result = signature.withUnsafeMutableBufferPointer { out in
      input.withUnsafeBufferPointer { EVP_DigestSign(context, out.baseAddress, &length, $0.baseAddress, count) }
    }
    precondition(result == 1, "EVP_DigestSign failed")
    return Array(signature.prefix(length))
  }

  private static func groupName(_ key: OpaquePointer) -> String? {
    var name = [CChar](repeating: 0, count: 64)
    var length = 0
    guard EVP_PKEY_get_group_name(key, &name, name.count, &length) == 1 else { return nil }
    return String(decoding: name.prefix(length).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// ECDSA signatures between the DER `SEQUENCE { INTEGER r, INTEGER s }` OpenSSL uses
/// (SEC 1 §C.8) and the fixed-width `r || s` of JWS (RFC 7518 §3.4).
enum ECDSASignature {
  /// `r || s`, each left-padded to `width` bytes; nil if `der` is not that structure.
  static func joined(der: [UInt8], width: Int) -> [UInt8]? {
    var reader = DERReader(bytes: der)
    guard reader.take(0x30), let body = reader.length(), body == reader.remaining,
      let r = reader.integer(), let s = reader.integer(), reader.remaining == 0,
      r.count <= width, s.count <= width
    else { return nil }
    return [UInt8](repeating: 0, count: width - r.count) + r + [UInt8](repeating: 0, count: width - s.count) + s
  }

  /// The DER form of an even-length `r || s`; nil for an odd or empty input.
  static func der(joined: [UInt8]) -> [UInt8]? {
    guard !joined.isEmpty, joined.count % 2 == 0, joined.count <= 2 * 66 else { return nil }
    let half = joined.count / 2
    let body = integer(Array(joined[..<half])) + integer(Array(joined[half...]))
    return [0x30] + length(body.count) + body
  }

  /// A DER INTEGER of an unsigned big-endian magnitude: leading zeros stripped, one
  /// zero kept in front of a set high bit (X.690 §8.3).
  private static func integer(_ magnitude: [UInt8]) -> [UInt8] {
    var digits = Array(magnitude.drop { $0 == 0 })
    if digits.isEmpty || digits[0] & 0x80 != 0 { digits.insert(0, at: 0) }
    return [0x02] + length(digits.count) + digits
  }

  private static func length(_ count: Int) -> [UInt8] {
    count < 0x80 ? [UInt8(count)] : [0x81, UInt8(count)]
  }
}

/// Reads the few DER forms an ECDSA signature uses (short and one-byte long lengths).
struct DERReader {
  let bytes: [UInt8]
  var offset = 0
  var remaining: Int { bytes.count - offset }

  init(bytes: [UInt8]) { self.bytes = bytes }

  mutating func take(_ tag: UInt8) -> Bool {
    guard offset < bytes.count, bytes[offset] == tag else { return false }
    offset += 1
    return true
  }

  mutating func length() -> Int? {
    guard offset < bytes.count else { return nil }
    let first = bytes[offset]
    offset += 1
    if first < 0x80 { return Int(first) }
    guard first == 0x81, offset < bytes.count else { return nil }
    offset += 1
    return Int(bytes[offset - 1])
  }

  /// An INTEGER's magnitude without its sign-padding zeros.
  mutating func integer() -> [UInt8]? {
    guard take(0x02), let count = length(), count > 0, count <= remaining else { return nil }
    let value = bytes[offset..<offset + count]
    offset += count
    return Array(value.drop { $0 == 0 })
  }
}
