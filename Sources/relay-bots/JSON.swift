// JSON in relay-bots. Reading uses RelayProtocol's parser and value type, the one JSON
// model of the project; the session events that arrive by the hundred thousand skip
// it (EventScan.swift). Commands are written straight into bytes by `JsonWriter`.
import RelayProtocol

/// The views of a parsed value the bots use, and the report's constructors.
extension JSONValue {
  /// Integral numbers that fit an Int; nil otherwise (wire values never trap).
  var int: Int? { numberValue?.int64.flatMap { Int(exactly: $0) } }
  var double: Double? { numberValue?.double }
  var objectMembers: [(String, JSONValue)]? { objectValue?.members.map { ($0.key, $0.value) } }

  /// A number for the report: integral values without a fraction.
  static func num(_ d: Double) -> JSONValue {
    guard d.isFinite else { return .null }
    if d == d.rounded(), abs(d) < 9.0e15 { return .number(JSONNumber(Int64(d))) }
    return .number((try? JSONParser.parse("\(d)").numberValue) ?? JSONNumber(0))
  }

  /// An object from (key, value) pairs, in order.
  static func fields(_ members: [(String, JSONValue)]) -> JSONValue {
    .object(JSONObject(members.map { (key: $0.0, value: $0.1) }))
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
}
