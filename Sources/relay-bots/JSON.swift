// JSON in relay-bots: RelayProtocol's parser, value type and writer, the one JSON
// model of the project (commands are RelayClientCore's encoding; the message
// events that arrive by the million skip the parser, MessageLayout.swift). Here:
// the views of a parsed value the bots read, and the report's constructors.
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
