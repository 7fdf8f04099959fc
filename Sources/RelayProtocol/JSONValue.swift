// The JSON data model of the wire protocol (RFC 8259), kept free of Foundation so the
// pure targets stay deterministic (DESIGN.md, "Layers").

/// A JSON number kept as its original, validated lexeme (RFC 8259 §6).
///
/// Why text: the relay mostly forwards numbers (`message.send.data`), and forwarding
/// the exact text never loses precision. Huge values such as `1e400` or
/// `123456789012345678901234567890` are therefore accepted and echoed verbatim; only
/// the typed views below can fail: `int64` is nil for non-integers or values outside
/// Int64, and `double` is ±infinity for magnitudes beyond Double (never a trap).
public struct JSONNumber: Sendable, Hashable, CustomStringConvertible {
  /// The lexeme exactly as parsed or produced (already valid RFC 8259 number syntax).
  public let text: String

  /// Trusted initializer: `text` must already be valid number syntax (the parser
  /// guarantees it).
  init(validatedText text: String) { self.text = text }

  public init(_ value: Int64) { self.text = String(value) }
  public init(_ value: Int) { self.text = String(value) }

  /// The value when it is an integer literal (no fraction, no exponent) inside Int64.
  public var int64: Int64? { Int64(text) }

  /// The value as a Double (±infinity when out of range, rounded otherwise).
  public var double: Double {
    Double(text) ?? (text.hasPrefix("-") ? -Double.infinity : Double.infinity)
  }

  public var description: String { text }
}

/// An object with its members in insertion (wire) order, so re-encoding is stable and
/// deterministic. Lookup is a linear scan: protocol objects have a handful of keys.
/// Duplicate names (RFC 8259 §4 "SHOULD be unique") are kept; lookup returns the last,
/// as ECMAScript's JSON.parse does.
public struct JSONObject: Sendable, Hashable {
  public var members: [(key: String, value: JSONValue)]

  public init(_ members: [(key: String, value: JSONValue)] = []) { self.members = members }

  public subscript(key: String) -> JSONValue? {
    for member in members.reversed() where member.key == key { return member.value }
    return nil
  }

  public mutating func append(_ key: String, _ value: JSONValue) {
    members.append((key: key, value: value))
  }

  public var count: Int { members.count }

  public static func == (a: JSONObject, b: JSONObject) -> Bool {
    a.members.count == b.members.count
      && zip(a.members, b.members).allSatisfy { $0.key == $1.key && $0.value == $1.value }
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(members.count)
    for member in members {
      hasher.combine(member.key)
      hasher.combine(member.value)
    }
  }
}

/// Any JSON value. Not `indirect`: arrays and objects already store their elements
/// out of line, so scalars need no box (one allocation less per value when parsing).
public enum JSONValue: Sendable, Hashable {
  case null
  case bool(Bool)
  case number(JSONNumber)
  case string(String)
  case array([JSONValue])
  case object(JSONObject)

  public var stringValue: String? {
    if case .string(let s) = self { return s }
    return nil
  }

  public var boolValue: Bool? {
    if case .bool(let b) = self { return b }
    return nil
  }

  public var numberValue: JSONNumber? {
    if case .number(let n) = self { return n }
    return nil
  }

  public var objectValue: JSONObject? {
    if case .object(let o) = self { return o }
    return nil
  }

  public var arrayValue: [JSONValue]? {
    if case .array(let a) = self { return a }
    return nil
  }

  public var isNull: Bool {
    if case .null = self { return true }
    return false
  }

  /// Member lookup when this is an object; nil otherwise.
  public subscript(key: String) -> JSONValue? { objectValue?[key] }
}

extension JSONValue {
  /// False when a number anywhere inside overflows a double (`1e400`): RFC 8259 §6
  /// warns that such numbers do not interoperate, and JavaScript and Python clients
  /// read them as `Infinity`. Recursion is bounded by the parser's nesting limit.
  public var hasOnlyFiniteNumbers: Bool {
    switch self {
    case .null, .bool, .string: return true
    case .number(let n): return n.isRepresentable
    case .array(let elements): return elements.allSatisfy { $0.hasOnlyFiniteNumbers }
    case .object(let object): return object.members.allSatisfy { $0.value.hasOnlyFiniteNumbers }
    }
  }
}

extension JSONNumber {
  /// The value fits a double (underflow to zero is fine). An integer literal of at
  /// most 300 digits always fits, so only longer ones and exponents are converted.
  public var isRepresentable: Bool {
    guard text.utf8.count > 300 || text.utf8.contains(where: { $0 | 0x20 == UInt8(ascii: "e") }) else { return true }
    return double.isFinite
  }
}
