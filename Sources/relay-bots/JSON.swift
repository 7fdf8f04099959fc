// A small JSON value, parser and writer private to relay-bots.
//
// Why our own: the bots parse every event they receive (hundreds of thousands
// per second in the fan-out benchmark), so parsing must not go through
// Foundation, and RelayProtocol's JSON type was not yet available when the bots
// were written. Everything else talks to `Json` only, so switching to
// RelayProtocol's type later touches this file alone.

/// A parsed JSON value. Objects keep their keys in wire order (a small array
/// searched linearly: event objects have under a dozen keys).
enum Json: Equatable {
  case null
  case bool(Bool)
  case number(Double)
  case string(String)
  case array([Json])
  case object([(String, Json)])

  static func == (a: Json, b: Json) -> Bool {
    switch (a, b) {
    case (.null, .null): return true
    case (.bool(let x), .bool(let y)): return x == y
    case (.number(let x), .number(let y)): return x == y
    case (.string(let x), .string(let y)): return x == y
    case (.array(let x), .array(let y)): return x == y
    case (.object(let x), .object(let y)):
      return x.count == y.count && zip(x, y).allSatisfy { $0.0 == $1.0 && $0.1 == $1.1 }
    default: return false
    }
  }

  subscript(key: String) -> Json? {
    guard case .object(let members) = self else { return nil }
    for (k, v) in members where k == key { return v }
    return nil
  }

  var string: String? {
    if case .string(let s) = self { return s }
    return nil
  }

  var double: Double? {
    if case .number(let d) = self { return d }
    return nil
  }

  /// Integral numbers only, range-checked: wire values never trap.
  var int: Int? {
    guard case .number(let d) = self, d == d.rounded(), abs(d) < 9.0e15 else { return nil }
    return Int(d)
  }

  var bool: Bool? {
    if case .bool(let b) = self { return b }
    return nil
  }

  var array: [Json]? {
    if case .array(let a) = self { return a }
    return nil
  }

  var objectMembers: [(String, Json)]? {
    if case .object(let o) = self { return o }
    return nil
  }
}

/// Errors from `JsonParser`; the offset helps when a scenario file is wrong.
struct JsonParseError: Error, CustomStringConvertible {
  let offset: Int
  let reason: String
  var description: String { "JSON error at byte \(offset): \(reason)" }
}

/// Recursive-descent parser over UTF-8 bytes. Depth is capped so a hostile
/// peer cannot overflow the stack.
struct JsonParser {
  private let bytes: [UInt8]
  private var i = 0
  private var depth = 0
  private static let maxDepth = 64

  static func parse(_ bytes: [UInt8]) throws -> Json {
    var p = JsonParser(bytes: bytes)
    let value = try p.parseValue()
    p.skipSpace()
    guard p.i == bytes.count else { throw p.fail("trailing bytes") }
    return value
  }

  static func parse(_ text: String) throws -> Json { try parse(Array(text.utf8)) }

  private init(bytes: [UInt8]) { self.bytes = bytes }

  private func fail(_ reason: String) -> JsonParseError { JsonParseError(offset: i, reason: reason) }

  private mutating func skipSpace() {
    while i < bytes.count {
      let c = bytes[i]
      guard c == 0x20 || c == 0x0A || c == 0x0D || c == 0x09 else { return }
      i += 1
    }
  }

  private mutating func parseValue() throws -> Json {
    skipSpace()
    guard i < bytes.count else { throw fail("unexpected end") }
    switch bytes[i] {
    case UInt8(ascii: "{"): return try parseObject()
    case UInt8(ascii: "["): return try parseArray()
    case UInt8(ascii: "\""): return .string(try parseString())
    case UInt8(ascii: "t"): try expectWord("true"); return .bool(true)
    case UInt8(ascii: "f"): try expectWord("false"); return .bool(false)
    case UInt8(ascii: "n"): try expectWord("null"); return .null
    default: return .number(try parseNumber())
    }
  }

  private mutating func expectWord(_ word: StaticString) throws {
    let n = word.utf8CodeUnitCount
    guard i + n <= bytes.count else { throw fail("bad literal") }
    for k in 0..<n where bytes[i + k] != word.utf8Start[k] { throw fail("bad literal") }
    i += n
  }

  private mutating func enter() throws {
    depth += 1
    if depth > Self.maxDepth { throw fail("nesting too deep") }
  }

  private mutating func parseObject() throws -> Json {
    try enter()
    defer { depth -= 1 }
    i += 1
    var members: [(String, Json)] = []
    skipSpace()
    if i < bytes.count, bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
    while true {
      skipSpace()
      guard i < bytes.count, bytes[i] == UInt8(ascii: "\"") else { throw fail("expected key") }
      let key = try parseString()
      skipSpace()
      guard i < bytes.count, bytes[i] == UInt8(ascii: ":") else { throw fail("expected ':'") }
      i += 1
      members.append((key, try parseValue()))
      skipSpace()
      guard i < bytes.count else { throw fail("unexpected end") }
      if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
      if bytes[i] == UInt8(ascii: "}") { i += 1; return .object(members) }
      throw fail("expected ',' or '}'")
    }
  }

  private mutating func parseArray() throws -> Json {
    try enter()
    defer { depth -= 1 }
    i += 1
    var items: [Json] = []
    skipSpace()
    if i < bytes.count, bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
    while true {
      items.append(try parseValue())
      skipSpace()
      guard i < bytes.count else { throw fail("unexpected end") }
      if bytes[i] == UInt8(ascii: ",") { i += 1; continue }
      if bytes[i] == UInt8(ascii: "]") { i += 1; return .array(items) }
      throw fail("expected ',' or ']'")
    }
  }

  /// Strings without escapes (the common case) are decoded straight from the
  /// byte range; escapes take the slow path.
  private mutating func parseString() throws -> String {
    i += 1
    let start = i
    while i < bytes.count {
      let c = bytes[i]
      if c == UInt8(ascii: "\"") {
        let s = String(decoding: bytes[start..<i], as: UTF8.self)
        i += 1
        return s
      }
      if c == UInt8(ascii: "\\") { return try parseEscapedString(from: start) }
      i += 1
    }
    throw fail("unterminated string")
  }

  private mutating func parseEscapedString(from start: Int) throws -> String {
    var out = Array(bytes[start..<i])
    while i < bytes.count {
      let c = bytes[i]
      i += 1
      if c == UInt8(ascii: "\"") { return String(decoding: out, as: UTF8.self) }
      guard c == UInt8(ascii: "\\") else { out.append(c); continue }
      guard i < bytes.count else { break }
      let e = bytes[i]
      i += 1
      switch e {
      case UInt8(ascii: "n"): out.append(0x0A)
      case UInt8(ascii: "t"): out.append(0x09)
      case UInt8(ascii: "r"): out.append(0x0D)
      case UInt8(ascii: "b"): out.append(0x08)
      case UInt8(ascii: "f"): out.append(0x0C)
      case UInt8(ascii: "u"): out.append(contentsOf: try parseUnicodeEscape())
      default: out.append(e)
      }
    }
    throw fail("unterminated string")
  }

  private mutating func parseHex4() throws -> UInt32 {
    guard i + 4 <= bytes.count else { throw fail("bad \\u escape") }
    var v: UInt32 = 0
    for _ in 0..<4 {
      let c = bytes[i]
      i += 1
      guard let d = hexDigit(c) else { throw fail("bad \\u escape") }
      v = v << 4 | d
    }
    return v
  }

  private mutating func parseUnicodeEscape() throws -> [UInt8] {
    var scalar = try parseHex4()
    if scalar >= 0xD800, scalar < 0xDC00, i + 6 <= bytes.count,
      bytes[i] == UInt8(ascii: "\\"), bytes[i + 1] == UInt8(ascii: "u")
    {
      i += 2
      let low = try parseHex4()
      scalar = 0x10000 + ((scalar - 0xD800) << 10) + (low &- 0xDC00) & 0x3FF
    }
    let s = Unicode.Scalar(scalar) ?? "\u{FFFD}"
    return Array(String(Character(s)).utf8)
  }

  private mutating func parseNumber() throws -> Double {
    let start = i
    while i < bytes.count {
      let c = bytes[i]
      let isNumberByte =
        (c >= UInt8(ascii: "0") && c <= UInt8(ascii: "9")) || c == UInt8(ascii: "-")
        || c == UInt8(ascii: "+") || c == UInt8(ascii: ".") || c == UInt8(ascii: "e")
        || c == UInt8(ascii: "E")
      guard isNumberByte else { break }
      i += 1
    }
    guard i > start else { throw fail("unexpected byte") }
    if let v = fastInteger(start, i) { return v }
    guard let d = Double(String(decoding: bytes[start..<i], as: UTF8.self)) else {
      throw fail("bad number")
    }
    return d
  }

  /// Plain integers (seq, ts, hrtime stamps) skip the String round trip.
  private func fastInteger(_ start: Int, _ end: Int) -> Double? {
    var k = start
    let negative = bytes[k] == UInt8(ascii: "-")
    if negative { k += 1 }
    guard k < end, end - k <= 18 else { return nil }
    var v: Int64 = 0
    while k < end {
      let c = bytes[k]
      guard c >= UInt8(ascii: "0"), c <= UInt8(ascii: "9") else { return nil }
      v = v * 10 + Int64(c - UInt8(ascii: "0"))
      k += 1
    }
    return Double(negative ? -v : v)
  }
}

private func hexDigit(_ c: UInt8) -> UInt32? {
  switch c {
  case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0"))
  case UInt8(ascii: "a")...UInt8(ascii: "f"): return UInt32(c - UInt8(ascii: "a") + 10)
  case UInt8(ascii: "A")...UInt8(ascii: "F"): return UInt32(c - UInt8(ascii: "A") + 10)
  default: return nil
  }
}

/// Appends compact JSON to a byte buffer. Commands are built with it directly
/// (no intermediate value) because the bots send at high rates.
struct JsonWriter {
  var bytes: [UInt8] = []

  init(capacity: Int = 128) { bytes.reserveCapacity(capacity) }

  mutating func raw(_ s: StaticString) {
    bytes.append(contentsOf: UnsafeBufferPointer(start: s.utf8Start, count: s.utf8CodeUnitCount))
  }

  mutating func string(_ s: String) {
    bytes.append(UInt8(ascii: "\""))
    for c in s.utf8 {
      switch c {
      case UInt8(ascii: "\""): raw("\\\"")
      case UInt8(ascii: "\\"): raw("\\\\")
      case 0..<0x20:
        raw("\\u00")
        let hex = Array("0123456789abcdef".utf8)
        bytes.append(hex[Int(c >> 4)])
        bytes.append(hex[Int(c & 15)])
      default: bytes.append(c)
      }
    }
    bytes.append(UInt8(ascii: "\""))
  }

  mutating func int(_ v: Int) { bytes.append(contentsOf: String(v).utf8) }
  mutating func uint(_ v: UInt64) { bytes.append(contentsOf: String(v).utf8) }

  mutating func number(_ v: Double) {
    if v == v.rounded(), abs(v) < 9.0e15 { int(Int(v)) } else { bytes.append(contentsOf: "\(v)".utf8) }
  }

  mutating func value(_ v: Json) {
    switch v {
    case .null: raw("null")
    case .bool(let b): if b { raw("true") } else { raw("false") }
    case .number(let d): number(d)
    case .string(let s): string(s)
    case .array(let items):
      bytes.append(UInt8(ascii: "["))
      for (k, item) in items.enumerated() {
        if k > 0 { bytes.append(UInt8(ascii: ",")) }
        value(item)
      }
      bytes.append(UInt8(ascii: "]"))
    case .object(let members):
      bytes.append(UInt8(ascii: "{"))
      for (k, (key, item)) in members.enumerated() {
        if k > 0 { bytes.append(UInt8(ascii: ",")) }
        string(key)
        bytes.append(UInt8(ascii: ":"))
        value(item)
      }
      bytes.append(UInt8(ascii: "}"))
    }
  }

  /// Compact JSON text of a value (report files).
  static func render(_ v: Json) -> String {
    var w = JsonWriter()
    w.value(v)
    return String(decoding: w.bytes, as: UTF8.self)
  }
}
