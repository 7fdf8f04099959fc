// Base64 (RFC 4648): the standard alphabet with padding (§4), as the opening
// handshake uses for Sec-WebSocket-Key and Sec-WebSocket-Accept (RFC 6455 §4.1,
// §4.2.2), and base64url without padding (§5), as JWS compact serialization requires
// (RFC 7515 §2). One encoder serves both.

/// Standard-alphabet, padded Base64.
public enum Base64 {
  static let alphabet: [UInt8] = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

  /// Encodes `bytes`, padding with "=" to a multiple of 4 characters.
  public static func encode(_ bytes: [UInt8]) -> String {
    encode(bytes, alphabet: alphabet, padding: true)
  }

  /// The one encoder: 3 bytes → 4 characters of `alphabet`; a short last group is
  /// padded with "=" or left short.
  static func encode(_ bytes: [UInt8], alphabet: [UInt8], padding: Bool) -> String {
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
      if remaining > 1 { out.append(alphabet[Int(group >> 6 & 63)]) } else if padding { out.append(UInt8(ascii: "=")) }
      if remaining > 2 { out.append(alphabet[Int(group & 63)]) } else if padding { out.append(UInt8(ascii: "=")) }
      i += 3
    }
    return String(decoding: out, as: UTF8.self)
  }

  /// Decodes strictly: length a multiple of 4, only alphabet characters,
  /// "=" only as final padding, and the unused bits of the last group zero
  /// (RFC 4648 §3.5), so each byte string has exactly one accepted form.
  /// Returns nil on anything else.
  public static func decode(_ text: String) -> [UInt8]? {
    var text = text
    return text.withUTF8 { chars -> [UInt8]? in
      guard chars.count % 4 == 0 else { return nil }
      var out: [UInt8] = []
      out.reserveCapacity(chars.count / 4 * 3)
      var i = 0
      while i < chars.count {
        let isLast = i + 4 == chars.count
        let padding = isLast ? (chars[i + 3] == UInt8(ascii: "=") ? (chars[i + 2] == UInt8(ascii: "=") ? 2 : 1) : 0) : 0
        var group: UInt32 = 0
        for k in 0..<4 - padding {
          guard let value = sextet(chars[i + k]) else { return nil }
          group = group << 6 | UInt32(value)
        }
        group <<= UInt32(6 * padding)
        // Non-canonical: bits that padding says are unused must be zero.
        if padding == 2 && group & 0xFFFF != 0 { return nil }
        if padding == 1 && group & 0xFF != 0 { return nil }
        out.append(UInt8(group >> 16 & 0xFF))
        if padding < 2 { out.append(UInt8(group >> 8 & 0xFF)) }
        if padding < 1 { out.append(UInt8(group & 0xFF)) }
        i += 4
      }
      return out
    }
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

/// base64url without padding (RFC 4648 §5).
public enum Base64URL {
  static let alphabet: [UInt8] = Array(
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  static let decodeTable: [UInt8] = {
    var table = [UInt8](repeating: 0xFF, count: 256)
    for (i, byte) in alphabet.enumerated() { table[Int(byte)] = UInt8(i) }
    return table
  }()

  /// Encodes without padding.
  public static func encode(_ bytes: [UInt8]) -> String {
    Base64.encode(bytes, alphabet: alphabet, padding: false)
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
