// A strict RFC 8259 parser over raw bytes. It never recurses deeper than `maxDepth`
// containers, so hostile nesting (e.g. 10 000 '[') is a clean error instead of a
// stack overflow, and it never traps on input (DESIGN.md, "Limits and failures").

/// Why a text is not acceptable JSON; `offset` is the byte position of the problem.
public struct JSONError: Error, Sendable, Equatable, CustomStringConvertible {
  public enum Kind: Sendable, Equatable {
    case unexpectedEnd, unexpectedByte, invalidNumber, invalidString, invalidEscape
    case invalidUTF8, loneSurrogate, controlCharacter, tooDeep, trailingData
  }
  public let kind: Kind
  public let offset: Int
  public var description: String { "\(kind) at byte \(offset)" }
}

/// Entry points of the parser.
public enum JSONParser {
  /// Default container nesting limit; protocol messages nest 3–4 levels, app `data`
  /// a few more.
  public static let defaultMaxDepth = 64

  /// Parses one complete JSON text (RFC 8259 §2: any value, surrounded by whitespace).
  public static func parse(_ bytes: [UInt8], maxDepth: Int = defaultMaxDepth) throws(JSONError)
    -> JSONValue
  {
    let result: Result<JSONValue, JSONError> = bytes.withUnsafeBufferPointer { buffer in
      var parser = ByteParser(buffer: buffer, maxDepth: maxDepth)
      return Result { () throws(JSONError) in try parser.parseDocument() }
    }
    return try result.get()
  }

  /// Parses straight from memory the caller owns (e.g. the shell's reassembly
  /// buffer), without copying it into an array first.
  public static func parse(_ buffer: UnsafeRawBufferPointer, maxDepth: Int = defaultMaxDepth)
    throws(JSONError) -> JSONValue
  {
    var parser = ByteParser(buffer: buffer.assumingMemoryBound(to: UInt8.self), maxDepth: maxDepth)
    return try parser.parseDocument()
  }

  /// Convenience for tests and callers holding a String.
  public static func parse(_ text: String, maxDepth: Int = defaultMaxDepth) throws(JSONError)
    -> JSONValue
  {
    try parse(Array(text.utf8), maxDepth: maxDepth)
  }
}

/// The cursor over one buffer. Kept as a value type living on the caller's stack.
struct ByteParser {
  let buffer: UnsafeBufferPointer<UInt8>
  let maxDepth: Int
  var index = 0
  var depth = 0

  init(buffer: UnsafeBufferPointer<UInt8>, maxDepth: Int) {
    self.buffer = buffer
    self.maxDepth = maxDepth
  }

  func fail(_ kind: JSONError.Kind) -> JSONError { JSONError(kind: kind, offset: index) }

  mutating func parseDocument() throws(JSONError) -> JSONValue {
    skipWhitespace()
    let value = try parseValue()
    skipWhitespace()
    guard index == buffer.count else { throw fail(.trailingData) }
    return value
  }

  mutating func skipWhitespace() {
    while index < buffer.count {
      switch buffer[index] {
      case 0x20, 0x09, 0x0A, 0x0D: index += 1
      default: return
      }
    }
  }

  mutating func parseValue() throws(JSONError) -> JSONValue {
    guard index < buffer.count else { throw fail(.unexpectedEnd) }
    switch buffer[index] {
    case UInt8(ascii: "{"): return try parseObject()
    case UInt8(ascii: "["): return try parseArray()
    case UInt8(ascii: "\""): return .string(try parseString())
    case UInt8(ascii: "t"): try expectLiteral("true"); return .bool(true)
    case UInt8(ascii: "f"): try expectLiteral("false"); return .bool(false)
    case UInt8(ascii: "n"): try expectLiteral("null"); return .null
    case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"): return .number(try parseNumber())
    default: throw fail(.unexpectedByte)
    }
  }

  mutating func expectLiteral(_ literal: StaticString) throws(JSONError) {
    let count = literal.utf8CodeUnitCount
    guard buffer.count - index >= count else { throw fail(.unexpectedEnd) }
    let start = literal.utf8Start
    for i in 0..<count where buffer[index + i] != start[i] {
      index += i
      throw fail(.unexpectedByte)
    }
    index += count
  }

  mutating func enterContainer() throws(JSONError) {
    depth += 1
    guard depth <= maxDepth else { throw fail(.tooDeep) }
    index += 1
    skipWhitespace()
  }

  mutating func parseObject() throws(JSONError) -> JSONValue {
    try enterContainer()
    var object = JSONObject()
    if index < buffer.count, buffer[index] == UInt8(ascii: "}") {
      index += 1
      depth -= 1
      return .object(object)
    }
    while true {
      guard index < buffer.count else { throw fail(.unexpectedEnd) }
      guard buffer[index] == UInt8(ascii: "\"") else { throw fail(.unexpectedByte) }
      let key = try parseString()
      skipWhitespace()
      try expectByte(UInt8(ascii: ":"))
      skipWhitespace()
      object.append(key, try parseValue())
      skipWhitespace()
      if try endOfContainer(closing: UInt8(ascii: "}")) { return .object(object) }
    }
  }

  mutating func parseArray() throws(JSONError) -> JSONValue {
    try enterContainer()
    var array: [JSONValue] = []
    if index < buffer.count, buffer[index] == UInt8(ascii: "]") {
      index += 1
      depth -= 1
      return .array(array)
    }
    while true {
      array.append(try parseValue())
      skipWhitespace()
      if try endOfContainer(closing: UInt8(ascii: "]")) { return .array(array) }
    }
  }

  /// After a member/element: `,` continues (true = done only on the closing byte).
  mutating func endOfContainer(closing: UInt8) throws(JSONError) -> Bool {
    guard index < buffer.count else { throw fail(.unexpectedEnd) }
    let byte = buffer[index]
    index += 1
    if byte == closing {
      depth -= 1
      return true
    }
    guard byte == UInt8(ascii: ",") else {
      index -= 1
      throw fail(.unexpectedByte)
    }
    skipWhitespace()
    return false
  }

  mutating func expectByte(_ byte: UInt8) throws(JSONError) {
    guard index < buffer.count else { throw fail(.unexpectedEnd) }
    guard buffer[index] == byte else { throw fail(.unexpectedByte) }
    index += 1
  }

  /// RFC 8259 §6: `-? (0 | [1-9][0-9]*) (\.[0-9]+)? ([eE][+-]?[0-9]+)?`.
  mutating func parseNumber() throws(JSONError) -> JSONNumber {
    let start = index
    if buffer[index] == UInt8(ascii: "-") { index += 1 }
    guard index < buffer.count, isDigit(buffer[index]) else { throw fail(.invalidNumber) }
    if buffer[index] == UInt8(ascii: "0") { index += 1 } else { skipDigits() }
    if index < buffer.count, buffer[index] == UInt8(ascii: ".") {
      index += 1
      guard index < buffer.count, isDigit(buffer[index]) else { throw fail(.invalidNumber) }
      skipDigits()
    }
    if index < buffer.count, buffer[index] | 0x20 == UInt8(ascii: "e") {
      index += 1
      if index < buffer.count, buffer[index] == UInt8(ascii: "+") || buffer[index] == UInt8(ascii: "-") {
        index += 1
      }
      guard index < buffer.count, isDigit(buffer[index]) else { throw fail(.invalidNumber) }
      skipDigits()
    }
    let text = String(decoding: UnsafeBufferPointer(rebasing: buffer[start..<index]), as: UTF8.self)
    return JSONNumber(validatedText: text)
  }

  func isDigit(_ byte: UInt8) -> Bool { byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") }

  mutating func skipDigits() {
    while index < buffer.count, isDigit(buffer[index]) { index += 1 }
  }
}
