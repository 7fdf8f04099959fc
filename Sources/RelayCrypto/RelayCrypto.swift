import COpenSSL
import RelayPrimitives

/// OpenSSL 3 one-shot primitives: the only Swift in the project that touches OpenSSL
/// (DESIGN.md, "Layers"). Pure modules receive these as injected functions, e.g.
/// `sha1` for `Sec-WebSocket-Accept` (RFC 6455 §4.2.2).
///
/// Failures of these calls mean a broken OpenSSL installation, not bad input, so they
/// trap with a message (DESIGN.md, "Limits and failures").
public enum Crypto {
  /// SHA-1 (20 bytes). Only for the WebSocket handshake, which RFC 6455 fixes to SHA-1;
  /// never for security decisions.
  public static func sha1(_ data: [UInt8]) -> [UInt8] {
    digest(data, algorithm: EVP_sha1(), length: 20)
  }

  /// SHA-256 (32 bytes).
  public static func sha256(_ data: [UInt8]) -> [UInt8] {
    digest(data, algorithm: EVP_sha256(), length: 32)
  }

  /// SHA-256 (32 bytes) of the pieces' bytes in order, as if joined: for a snapshot
  /// kept in upload-sized pieces, never joined into one array.
  public static func sha256(pieces: [[UInt8]]) -> [UInt8] {
    guard let context = EVP_MD_CTX_new() else { preconditionFailure("EVP_MD_CTX_new failed") }
    defer { EVP_MD_CTX_free(context) }
    precondition(EVP_DigestInit_ex(context, EVP_sha256(), nil) == 1, "EVP_DigestInit_ex failed")
    for piece in pieces where !piece.isEmpty {
      let ok = piece.withUnsafeBytes { EVP_DigestUpdate(context, $0.baseAddress, $0.count) }
      precondition(ok == 1, "EVP_DigestUpdate failed")
    }
    var output = [UInt8](repeating: 0, count: 32)
    var outputLength: UInt32 = 0
    let ok = output.withUnsafeMutableBufferPointer { EVP_DigestFinal_ex(context, $0.baseAddress, &outputLength) }
    precondition(ok == 1 && outputLength == 32, "EVP_DigestFinal_ex failed")
    return output
  }

  /// HMAC-SHA256 (32 bytes), RFC 2104 with SHA-256 (test vectors: RFC 4231).
  public static func hmacSHA256(key: [UInt8], message: [UInt8]) -> [UInt8] {
    var output = [UInt8](repeating: 0, count: 32)
    var outputLength: UInt32 = 0
    let result = withNonNullBytes(key) { keyBytes in
      withNonNullBytes(message) { messageBytes in
        output.withUnsafeMutableBufferPointer { out in
          HMAC(
            EVP_sha256(), keyBytes.baseAddress, Int32(keyBytes.count),
            messageBytes.baseAddress?.assumingMemoryBound(to: UInt8.self), messageBytes.count,
            out.baseAddress, &outputLength)
        }
      }
    }
    precondition(result != nil && outputLength == 32, "OpenSSL HMAC-SHA256 failed")
    return output
  }

  /// Compares in time independent of where the bytes differ (`CRYPTO_memcmp`), for
  /// MACs and tokens. Different lengths compare unequal (lengths are not secret).
  public static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
    guard a.count == b.count else { return false }
    guard !a.isEmpty else { return true }
    return a.withUnsafeBytes { left in
      b.withUnsafeBytes { right in CRYPTO_memcmp(left.baseAddress, right.baseAddress, a.count) == 0 }
    }
  }

  /// `count` bytes from OpenSSL's CSPRNG (`RAND_bytes`). Traps if it fails: handing out
  /// predictable tokens would be worse than stopping.
  public static func randomBytes(_ count: Int) -> [UInt8] {
    precondition(count >= 0 && count <= Int(Int32.max), "randomBytes count out of range")
    var bytes = [UInt8](repeating: 0, count: count)
    guard count > 0 else { return bytes }
    let result = bytes.withUnsafeMutableBufferPointer { RAND_bytes($0.baseAddress, Int32(count)) }
    precondition(result == 1, "RAND_bytes failed: OpenSSL CSPRNG unavailable")
    return bytes
  }

  /// A random token of `byteCount` random bytes, URL-safe base64 without padding
  /// (16 bytes give 128 bits in 22 characters).
  public static func randomToken(byteCount: Int) -> String {
    Base64URL.encode(randomBytes(byteCount))
  }

  /// Randomness drawn from OpenSSL's CSPRNG in 4 KiB blocks: each `RAND_bytes`
  /// call costs thousands of instructions whatever its size (the DRBG's locking and
  /// reseed checks), and every `hello` needs two tokens. Bytes are handed out once
  /// and wiped from the block as they go. Not thread-safe: one per loop.
  public final class RandomPool {
    private var block: [UInt8] = []
    private var used = 0

    public init() {}

    public func bytes(_ count: Int) -> [UInt8] {
      if count > block.count - used {
        block = Crypto.randomBytes(Swift.max(4096, count))
        used = 0
      }
      let out = Array(block[used..<used + count])
      for i in used..<used + count { block[i] = 0 }
      used += count
      return out
    }

    /// `Crypto.randomToken(byteCount:)` from the pool.
    public func token(byteCount: Int) -> String { Base64URL.encode(bytes(byteCount)) }
  }

  /// Lowercase hexadecimal.
  public static func hex(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }

  private static func digest(_ data: [UInt8], algorithm: OpaquePointer?, length: Int) -> [UInt8] {
    var output = [UInt8](repeating: 0, count: length)
    var outputLength: UInt32 = 0
    let result = withNonNullBytes(data) { input in
      output.withUnsafeMutableBufferPointer { out in
        EVP_Digest(input.baseAddress, input.count, out.baseAddress, &outputLength, algorithm, nil)
      }
    }
    precondition(result == 1 && Int(outputLength) == length, "OpenSSL EVP_Digest failed")
    return output
  }

  /// Runs `body` with a non-null base address even for an empty array (some OpenSSL
  /// entry points reject NULL even with length 0); the count stays 0.
  private static func withNonNullBytes<Result>(
    _ bytes: [UInt8], _ body: (UnsafeRawBufferPointer) -> Result
  ) -> Result {
    if bytes.isEmpty {
      var dummy: UInt8 = 0
      return withUnsafeBytes(of: &dummy) { body(UnsafeRawBufferPointer(start: $0.baseAddress, count: 0)) }
    }
    return bytes.withUnsafeBytes(body)
  }
}
