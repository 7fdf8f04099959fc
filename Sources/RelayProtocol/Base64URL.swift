// base64url without padding (RFC 4648 §5), as JWS compact serialization requires
// (RFC 7515 §2, Appendix C).

public enum Base64URL {
  static let alphabet: [UInt8] = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  static let decodeTable: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (i, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(i) }
    return table
  }()

  public static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count * 4 + 2) / 3)
    var i = 0
    while i + 3 <= bytes.count {
      let n = UInt32(bytes[i]) << 16 | UInt32(bytes[i + 1]) << 8 | UInt32(bytes[i + 2])
      for shift in [18, 12, 6, 0] { out.append(alphabet[Int((n >> UInt32(shift)) & 63)]) }
      i += 3
    }
    let rest = bytes.count - i
    if rest > 0 {
      var n = UInt32(bytes[i]) << 16
      if rest == 2 { n |= UInt32(bytes[i + 1]) << 8 }
      let shifts = rest == 1 ? [18, 12] : [18, 12, 6]
      for shift in shifts { out.append(alphabet[Int((n >> UInt32(shift)) & 63)]) }
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Strict decoding: only the URL-safe alphabet, no padding; nil otherwise.
  public static func decode(_ text: Substring) -> [UInt8]? {
    let input = Array(text.utf8)
    guard input.count % 4 != 1 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(input.count * 3 / 4)
    var accumulator: UInt32 = 0
    var bits = 0
    for byte in input {
      let value = decodeTable[Int(byte)]
      guard value != 0xFF else { return nil }
      accumulator = accumulator << 6 | UInt32(value)
      bits += 6
      if bits >= 8 {
        bits -= 8
        out.append(UInt8((accumulator >> UInt32(bits)) & 0xFF))
      }
    }
    return out
  }

  public static func decode(_ text: String) -> [UInt8]? { decode(Substring(text)) }
}
