// Lowercase hexadecimal (RFC 4648 §8, "base16", lowercase as APNs device tokens and
// digests are usually written): one encoder for the relay (digests, signatures) and
// the client (PushKit hands its token as bytes).

/// Lowercase base16.
public enum Hex {
  static let digits: [UInt8] = Array("0123456789abcdef".utf8)

  /// Two lowercase digits per byte.
  public static func encode(_ bytes: some Sequence<UInt8>) -> String {
    var characters = [UInt8]()
    characters.reserveCapacity(bytes.underestimatedCount * 2)
    for byte in bytes {
      characters.append(digits[Int(byte >> 4)])
      characters.append(digits[Int(byte & 0x0f)])
    }
    return String(decoding: characters, as: UTF8.self)
  }
}
