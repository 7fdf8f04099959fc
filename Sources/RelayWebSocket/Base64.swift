// Base64 (RFC 4648 §4, standard alphabet, with padding), as used by the
// opening handshake for Sec-WebSocket-Key and Sec-WebSocket-Accept
// (RFC 6455 §4.1, §4.2.2).

/// Standard-alphabet, padded Base64.
public enum Base64 {
  static let alphabet: [UInt8] = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  /// Encodes `bytes`, padding with "=" to a multiple of 4 characters.
  public static func encode(_ bytes: [UInt8]) -> String {
    var out: [UInt8] = []
    out.reserveCapacity((bytes.count + 2) / 3 * 4)
    var i = 0
    while i < bytes.count {
      let remaining = bytes.count - i
      let b0 = UInt32(bytes[i])
      let b1 = remaining > 1 ? UInt32(bytes[i + 1]) : 0
      let b2 = remaining > 2 ? UInt32(bytes[i + 2]) : 0
      let group = b0 << 16 | b1 << 8 | b2
      out.append(alphabet[Int(group >> 18 & 63)])
      out.append(alphabet[Int(group >> 12 & 63)])
      out.append(remaining > 1 ? alphabet[Int(group >> 6 & 63)] : UInt8(ascii: "="))
      out.append(remaining > 2 ? alphabet[Int(group & 63)] : UInt8(ascii: "="))
      i += 3
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Decodes strictly: length a multiple of 4, only alphabet characters,
  /// "=" only as final padding, and the unused bits of the last group zero
  /// (RFC 4648 §3.5), so each byte string has exactly one accepted form.
  /// Returns nil on anything else.
  public static func decode(_ text: String) -> [UInt8]? {
    let chars = Array(text.utf8)
    guard chars.count % 4 == 0 else { return nil }
    var out: [UInt8] = []
    out.reserveCapacity(chars.count / 4 * 3)
    var i = 0
    while i < chars.count {
      let isLast = i + 4 == chars.count
      guard let group = decodeGroup(chars[i..<i + 4], isLast: isLast) else { return nil }
      out.append(contentsOf: group)
      i += 4
    }
    return out
  }

  /// One 4-character group → 1…3 bytes, or nil.
  static func decodeGroup(_ chars: ArraySlice<UInt8>, isLast: Bool) -> [UInt8]? {
    let padding = chars.reversed().prefix { $0 == UInt8(ascii: "=") }.count
    guard padding <= 2, padding == 0 || isLast else { return nil }
    var group: UInt32 = 0
    for char in chars.prefix(4 - padding) {
      guard let value = sextet(char) else { return nil }
      group = group << 6 | UInt32(value)
    }
    group <<= UInt32(6 * padding)
    let bytes = [UInt8(group >> 16 & 0xFF), UInt8(group >> 8 & 0xFF), UInt8(group & 0xFF)]
    // Non-canonical: bits that padding says are unused must be zero.
    if padding == 2 && bytes[1] != 0 { return nil }
    if padding == 1 && bytes[2] != 0 { return nil }
    return Array(bytes.prefix(3 - padding))
  }

  static func sextet(_ char: UInt8) -> UInt8? {
    switch char {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): return char - UInt8(ascii: "A")
    case UInt8(ascii: "a")...UInt8(ascii: "z"): return char - UInt8(ascii: "a") + 26
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return char - UInt8(ascii: "0") + 52
    case UInt8(ascii: "+"): return 62
    case UInt8(ascii: "/"): return 63
    default: return nil
    }
  }
}
