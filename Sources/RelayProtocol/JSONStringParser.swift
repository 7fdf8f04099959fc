// String scanning for ByteParser (RFC 8259 §7): escapes, \u surrogate pairs, no raw
// control characters, valid UTF-8 only.

extension ByteParser {
  /// Parses a string starting at its opening quote. The common case (no escapes) is
  /// one scan plus one validating copy.
  mutating func parseString() throws(JSONError) -> String {
    index += 1  // opening quote
    let start = index
    var seen: UInt8 = 0  // every byte OR-ed: below 0x80 means all ASCII
    while index < buffer.count {
      let byte = buffer[index]
      if byte == UInt8(ascii: "\"") {
        let text = try makeString(start..<index, ascii: seen < 0x80)
        index += 1
        return text
      }
      seen |= byte
      if byte == UInt8(ascii: "\\") { return try parseEscapedString(prefix: start..<index) }
      if byte < 0x20 { throw fail(.controlCharacter) }
      index += 1
    }
    throw fail(.unexpectedEnd)
  }

  /// ASCII (keys, types, ids: nearly every string of the protocol) needs no
  /// validation; `String(validating:)` is generic over the encoding and, unspecialized
  /// in the standard library, looks up type metadata on every call.
  func makeString(_ range: Range<Int>, ascii: Bool = false) throws(JSONError) -> String {
    let slice = UnsafeBufferPointer(rebasing: buffer[range])
    if ascii { return String(decoding: slice, as: UTF8.self) }
    guard let text = String(validating: slice, as: UTF8.self) else {
      throw JSONError(kind: .invalidUTF8, offset: range.lowerBound)
    }
    return text
  }

  /// Slow path: decode escapes into a byte array, validate the UTF-8 at the end.
  mutating func parseEscapedString(prefix: Range<Int>) throws(JSONError) -> String {
    var bytes = [UInt8](UnsafeBufferPointer(rebasing: buffer[prefix]))
    while index < buffer.count {
      let byte = buffer[index]
      switch byte {
      case UInt8(ascii: "\""):
        index += 1
        guard let text = String(validating: bytes, as: UTF8.self) else {
          throw JSONError(kind: .invalidUTF8, offset: prefix.lowerBound)
        }
        return text
      case UInt8(ascii: "\\"):
        index += 1
        try decodeEscape(into: &bytes)
      case 0..<0x20:
        throw fail(.controlCharacter)
      default:
        bytes.append(byte)
        index += 1
      }
    }
    throw fail(.unexpectedEnd)
  }

  /// Decodes the escape after a backslash (RFC 8259 §7).
  mutating func decodeEscape(into bytes: inout [UInt8]) throws(JSONError) {
    guard index < buffer.count else { throw fail(.unexpectedEnd) }
    let byte = buffer[index]
    index += 1
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): bytes.append(byte)
    case UInt8(ascii: "b"): bytes.append(0x08)
    case UInt8(ascii: "f"): bytes.append(0x0C)
    case UInt8(ascii: "n"): bytes.append(0x0A)
    case UInt8(ascii: "r"): bytes.append(0x0D)
    case UInt8(ascii: "t"): bytes.append(0x09)
    case UInt8(ascii: "u"): appendScalar(try decodeUnicodeEscape(), to: &bytes)
    default:
      index -= 1
      throw fail(.invalidEscape)
    }
  }

  /// `\uXXXX`, pairing a high surrogate with the `\uXXXX` low surrogate that must follow.
  /// Lone surrogates are rejected: they cannot be represented in UTF-8.
  mutating func decodeUnicodeEscape() throws(JSONError) -> Unicode.Scalar {
    let unit = try readHex4()
    if unit >= 0xDC00 && unit <= 0xDFFF { throw fail(.loneSurrogate) }
    if unit < 0xD800 || unit > 0xDBFF {
      guard let scalar = Unicode.Scalar(unit) else { throw fail(.invalidEscape) }
      return scalar
    }
    guard buffer.count - index >= 6, buffer[index] == UInt8(ascii: "\\"),
      buffer[index + 1] == UInt8(ascii: "u")
    else { throw fail(.loneSurrogate) }
    index += 2
    let low = try readHex4()
    guard low >= 0xDC00 && low <= 0xDFFF else { throw fail(.loneSurrogate) }
    let value = 0x10000 + ((unit - 0xD800) << 10) + (low - 0xDC00)
    guard let scalar = Unicode.Scalar(value) else { throw fail(.invalidEscape) }
    return scalar
  }

  mutating func readHex4() throws(JSONError) -> UInt32 {
    guard buffer.count - index >= 4 else { throw fail(.unexpectedEnd) }
    var value: UInt32 = 0
    for _ in 0..<4 {
      let byte = buffer[index]
      let digit: UInt32
      switch byte {
      case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt32(byte - UInt8(ascii: "0"))
      case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt32(byte - UInt8(ascii: "a") + 10)
      case UInt8(ascii: "A")...UInt8(ascii: "F"): digit = UInt32(byte - UInt8(ascii: "A") + 10)
      default: throw fail(.invalidEscape)
      }
      value = value << 4 | digit
      index += 1
    }
    return value
  }

  func appendScalar(_ scalar: Unicode.Scalar, to bytes: inout [UInt8]) {
    UTF8.encode(scalar) { bytes.append($0) }
  }
}
