// Compact UTF-8 JSON output (RFC 8259), written straight into a byte buffer. Event
// encoding is the relay's hot path (DESIGN.md, "The hot path": one encode per event,
// shared by every recipient), so the writer appends bytes without building a tree.

/// Appends JSON tokens to `bytes`. Commas are inserted automatically: before a key or a
/// value, a comma is needed unless the previous byte opened a container or was a `:`.
/// (A completed value never ends in `{`, `[` or `:`, so the rule is exact.)
///
///     var w = JSONWriter()
///     w.beginObject(); w.field("type", "pong"); w.endObject()
public struct JSONWriter: Sendable {
  public var bytes: [UInt8]

  public init(capacity: Int = 256) {
    bytes = []
    bytes.reserveCapacity(capacity)
  }

  @inline(__always)
  mutating func separate() {
    guard let last = bytes.last else { return }
    if last != UInt8(ascii: "{") && last != UInt8(ascii: "[") && last != UInt8(ascii: ":") {
      bytes.append(UInt8(ascii: ","))
    }
  }

  public mutating func beginObject() {
    separate()
    bytes.append(UInt8(ascii: "{"))
  }

  public mutating func endObject() { bytes.append(UInt8(ascii: "}")) }

  public mutating func beginArray() {
    separate()
    bytes.append(UInt8(ascii: "["))
  }

  public mutating func endArray() { bytes.append(UInt8(ascii: "]")) }

  /// An object member name followed by `:`; the next call writes its value.
  public mutating func key(_ name: String) {
    separate()
    appendQuoted(name)
    bytes.append(UInt8(ascii: ":"))
  }

  public mutating func string(_ value: String) {
    separate()
    appendQuoted(value)
  }

  /// Decimal digits written in place (`String(value)` allocates a string per number).
  public mutating func number(_ value: Int64) {
    separate()
    if value < 0 { bytes.append(UInt8(ascii: "-")) }
    var magnitude = value.magnitude
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // 20 digits at most, reversed
    var count = 0
    withUnsafeMutableBytes(of: &digits) { raw in
      repeat {
        raw[count] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
        magnitude /= 10
        count += 1
      } while magnitude > 0
      for i in stride(from: count - 1, through: 0, by: -1) { bytes.append(raw[i]) }
    }
  }

  public mutating func number(_ value: Int) { number(Int64(value)) }

  public mutating func number(_ value: JSONNumber) {
    separate()
    bytes.append(contentsOf: value.text.utf8)
  }

  public mutating func bool(_ value: Bool) {
    separate()
    bytes.append(contentsOf: (value ? "true" : "false").utf8)
  }

  public mutating func null() {
    separate()
    bytes.append(contentsOf: "null".utf8)
  }

  /// Splices an already-encoded JSON value (e.g. a participant object or app `data`
  /// encoded once and reused).
  public mutating func raw(_ encoded: [UInt8]) {
    separate()
    bytes.append(contentsOf: encoded)
  }

  /// Writes any JSON value compactly, keeping object member order.
  public mutating func value(_ value: JSONValue) {
    switch value {
    case .null: null()
    case .bool(let b): bool(b)
    case .number(let n): number(n)
    case .string(let s): string(s)
    case .array(let elements):
      beginArray()
      for element in elements { self.value(element) }
      endArray()
    case .object(let object):
      beginObject()
      for member in object.members {
        key(member.key)
        self.value(member.value)
      }
      endObject()
    }
  }

  // MARK: Field shorthands (key + value), the common shape of protocol objects.

  public mutating func field(_ name: String, _ value: String) {
    key(name)
    string(value)
  }

  public mutating func field(_ name: String, _ value: Int64) {
    key(name)
    number(value)
  }

  public mutating func field(_ name: String, _ value: Int) {
    key(name)
    number(Int64(value))
  }

  public mutating func field(_ name: String, _ value: Bool) {
    key(name)
    bool(value)
  }

  /// Writes the member only when `value` is non-nil (optional protocol fields are
  /// omitted rather than sent as null).
  public mutating func optionalField(_ name: String, _ value: String?) {
    guard let value else { return }
    field(name, value)
  }

  /// Writes the member with `null` when `value` is nil (fields the contract keeps
  /// present but empty, e.g. `hand.lowered.by` for the admin API).
  public mutating func nullableField(_ name: String, _ value: String?) {
    key(name)
    if let value { string(value) } else { null() }
  }

  // MARK: String escaping (RFC 8259 §7)

  mutating func appendQuoted(_ text: String) {
    bytes.append(UInt8(ascii: "\""))
    let done: Void? = text.utf8.withContiguousStorageIfAvailable { appendEscaped($0) }
    if done == nil { appendEscaped(Array(text.utf8)) }
    bytes.append(UInt8(ascii: "\""))
  }

  /// Copies runs that need no escaping in one append; escapes `"`, `\` and C0 controls.
  mutating func appendEscaped<C: RandomAccessCollection>(_ source: C) where C.Element == UInt8, C.Index == Int {
    var runStart = source.startIndex
    var i = source.startIndex
    while i < source.endIndex {
      let byte = source[i]
      if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
        i += 1
        continue
      }
      bytes.append(contentsOf: source[runStart..<i])
      appendEscape(byte)
      i += 1
      runStart = i
    }
    bytes.append(contentsOf: source[runStart..<i])
  }

  mutating func appendEscape(_ byte: UInt8) {
    bytes.append(UInt8(ascii: "\\"))
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"): bytes.append(byte)
    case 0x08: bytes.append(UInt8(ascii: "b"))
    case 0x0C: bytes.append(UInt8(ascii: "f"))
    case 0x0A: bytes.append(UInt8(ascii: "n"))
    case 0x0D: bytes.append(UInt8(ascii: "r"))
    case 0x09: bytes.append(UInt8(ascii: "t"))
    default:
      let hex: [UInt8] = Array("0123456789abcdef".utf8)
      bytes.append(contentsOf: [UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0")])
      bytes.append(hex[Int(byte >> 4)])
      bytes.append(hex[Int(byte & 0x0F)])
    }
  }
}

extension JSONValue {
  /// Compact UTF-8 encoding of this value.
  public func encoded() -> [UInt8] {
    var writer = JSONWriter()
    writer.value(self)
    return writer.bytes
  }
}
