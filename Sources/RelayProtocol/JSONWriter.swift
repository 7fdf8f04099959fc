// Compact UTF-8 JSON output (RFC 8259), written straight into a byte buffer. Event
// encoding is the relay's hot path (DESIGN.md, "The hot path": one encode per event,
// shared by every recipient), so the writer appends bytes without building a tree.

/// Appends JSON tokens to `bytes`. Commas are inserted automatically: before a key or a
/// value, a comma is needed unless the previous byte opened a container or was a `:`.
/// (A completed value never ends in `{`, `[` or `:`, so the rule is exact.)
///
///     var w = JSONWriter()
///     w.beginObject(); w.field("type", "pong"); w.endObject()
public struct JSONWriter: ~Copyable, @unchecked Sendable {
  /// The output so far, copied out (once per message). The writer appends into a
  /// buffer of its own, with none of `Array`'s per-append uniqueness and capacity
  /// machinery: a large session's snapshot is thousands of small appends. The writer
  /// is not copyable, so the buffer has exactly one owner.
  public var bytes: [UInt8] {
    get { [UInt8](UnsafeRawBufferPointer(start: base, count: count)) }
    set {
      count = 0
      newValue.withUnsafeBytes { append($0) }
    }
  }

  private var base: UnsafeMutableRawPointer
  private var count = 0
  private var capacity: Int

  public init(capacity: Int = 256) {
    self.capacity = Swift.max(capacity, 16)
    base = .allocate(byteCount: self.capacity, alignment: 1)
  }

  deinit { base.deallocate() }

  /// The last byte written, 0 when empty (JSON output never holds a raw NUL byte).
  private var last: UInt8 { count == 0 ? 0 : base.load(fromByteOffset: count - 1, as: UInt8.self) }

  @inline(__always)
  mutating func append(_ byte: UInt8) {
    if count == capacity { grow(to: count + 1) }
    base.storeBytes(of: byte, toByteOffset: count, as: UInt8.self)
    count += 1
  }

  @inline(__always)
  mutating func append(_ bytes: UnsafeRawBufferPointer) {
    guard let source = bytes.baseAddress, bytes.count > 0 else { return }
    if count + bytes.count > capacity { grow(to: count + bytes.count) }
    (base + count).copyMemory(from: source, byteCount: bytes.count)
    count += bytes.count
  }

  mutating func append(_ bytes: [UInt8]) { bytes.withUnsafeBytes { append($0) } }

  private mutating func grow(to needed: Int) {
    var newCapacity = capacity * 2
    while newCapacity < needed { newCapacity *= 2 }
    let newBase = UnsafeMutableRawPointer.allocate(byteCount: newCapacity, alignment: 1)
    newBase.copyMemory(from: base, byteCount: count)
    base.deallocate()
    base = newBase
    capacity = newCapacity
  }

  @inline(__always)
  mutating func separate() {
    let last = self.last
    if last != 0 && last != UInt8(ascii: "{") && last != UInt8(ascii: "[") && last != UInt8(ascii: ":") {
      append(UInt8(ascii: ","))
    }
  }

  public mutating func beginObject() {
    separate()
    append(UInt8(ascii: "{"))
  }

  public mutating func endObject() { append(UInt8(ascii: "}")) }

  public mutating func beginArray() {
    separate()
    append(UInt8(ascii: "["))
  }

  public mutating func endArray() { append(UInt8(ascii: "]")) }

  /// An object member name followed by `:`; the next call writes its value.
  public mutating func key(_ name: String) {
    separate()
    appendQuoted(name)
    append(UInt8(ascii: ":"))
  }

  /// A member name known at compile time, written without the escaping scan (the
  /// protocol's names need none; checked in debug builds).
  public mutating func key(_ name: StaticString) {
    separate()
    append(UInt8(ascii: "\""))
    name.withUTF8Buffer { utf8 in
      assert(!utf8.contains { $0 < 0x20 || $0 == UInt8(ascii: "\"") || $0 == UInt8(ascii: "\\") }, "a key that needs escaping")
      append(UnsafeRawBufferPointer(utf8))
    }
    append(UInt8(ascii: "\""))
    append(UInt8(ascii: ":"))
  }

  public mutating func string(_ value: String) {
    separate()
    appendQuoted(value)
  }

  /// Decimal digits written in place (`String(value)` allocates a string per number),
  /// formed right to left in a stack buffer and appended in one copy.
  public mutating func number(_ value: Int64) {
    separate()
    var magnitude = value.magnitude
    var digits: (UInt64, UInt64, UInt64) = (0, 0, 0)  // a sign and 19 digits fit in 24 bytes
    withUnsafeMutableBytes(of: &digits) { raw in
      var start = raw.count
      repeat {
        start -= 1
        raw[start] = UInt8(ascii: "0") &+ UInt8(truncatingIfNeeded: magnitude % 10)
        magnitude /= 10
      } while magnitude > 0
      if value < 0 {
        start -= 1
        raw[start] = UInt8(ascii: "-")
      }
      append(UnsafeRawBufferPointer(rebasing: raw[start...]))
    }
  }

  public mutating func number(_ value: Int) { number(Int64(value)) }

  public mutating func number(_ value: JSONNumber) {
    separate()
    var text = value.text
    text.withUTF8 { append(UnsafeRawBufferPointer($0)) }
  }

  public mutating func bool(_ value: Bool) {
    separate()
    append(value ? Self.trueBytes : Self.falseBytes)
  }

  public mutating func null() {
    separate()
    append(Self.nullBytes)
  }

  /// Splices an already-encoded JSON value (e.g. a participant object or app `data`
  /// encoded once and reused).
  public mutating func raw(_ encoded: [UInt8]) {
    separate()
    append(encoded)
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

  public mutating func field(_ name: StaticString, _ value: String) {
    key(name)
    string(value)
  }

  public mutating func field(_ name: StaticString, _ value: Int64) {
    key(name)
    number(value)
  }

  public mutating func field(_ name: StaticString, _ value: Int) {
    key(name)
    number(Int64(value))
  }

  public mutating func field(_ name: StaticString, _ value: Bool) {
    key(name)
    bool(value)
  }

  /// Writes the member only when `value` is non-nil (optional protocol fields are
  /// omitted rather than sent as null).
  public mutating func optionalField(_ name: StaticString, _ value: String?) {
    guard let value else { return }
    field(name, value)
  }

  /// Writes the member with `null` when `value` is nil (fields the contract keeps
  /// present but empty, e.g. `hand.lowered.by` for the admin API).
  public mutating func nullableField(_ name: StaticString, _ value: String?) {
    key(name)
    if let value { string(value) } else { null() }
  }

  // MARK: String escaping (RFC 8259 §7)

  mutating func appendQuoted(_ text: String) {
    append(UInt8(ascii: "\""))
    // `withUTF8` also lends a small (inline) string's bytes, from the stack;
    // `utf8.withContiguousStorageIfAvailable` does not, and an array per string cost
    // more than the rest of the encoding.
    var text = text
    text.withUTF8 { appendEscaped(UnsafeRawBufferPointer($0)) }
    append(UInt8(ascii: "\""))
  }

  /// Copies runs that need no escaping in one append; escapes `"`, `\\` and C0
  /// controls (RFC 8259 §7). Eight bytes are checked at a time while none needs it.
  mutating func appendEscaped(_ source: UnsafeRawBufferPointer) {
    guard let start = source.baseAddress else { return }
    let n = source.count
    var runStart = 0
    var i = 0
    while i < n {
      if i + 8 <= n, !Self.anyNeedsEscape(start.loadUnaligned(fromByteOffset: i, as: UInt64.self)) {
        i += 8
        continue
      }
      let byte = start.load(fromByteOffset: i, as: UInt8.self)
      if byte >= 0x20 && byte != UInt8(ascii: "\"") && byte != UInt8(ascii: "\\") {
        i += 1
        continue
      }
      append(UnsafeRawBufferPointer(start: start + runStart, count: i - runStart))
      appendEscape(byte)
      i += 1
      runStart = i
    }
    append(UnsafeRawBufferPointer(start: start + runStart, count: n - runStart))
  }

  /// Whether any of eight bytes is below 0x20, `"` or `\\`: the classic exact tests
  /// for "some byte is zero" ((y − 0x01…) & ~y & 0x80…) and "some byte is below n"
  /// ((x − n·0x01…) & ~x & 0x80…, for n ≤ 0x80).
  @inline(__always)
  static func anyNeedsEscape(_ x: UInt64) -> Bool {
    let ones: UInt64 = 0x0101_0101_0101_0101
    let highs: UInt64 = 0x8080_8080_8080_8080
    let control = (x &- ones &* 0x20) & ~x & highs
    let q = x ^ (ones &* 0x22)
    let quote = (q &- ones) & ~q & highs
    let b = x ^ (ones &* 0x5C)
    let backslash = (b &- ones) & ~b & highs
    return (control | quote | backslash) != 0
  }

  mutating func appendEscape(_ byte: UInt8) {
    append(UInt8(ascii: "\\"))
    switch byte {
    case UInt8(ascii: "\""), UInt8(ascii: "\\"): append(byte)
    case 0x08: append(UInt8(ascii: "b"))
    case 0x0C: append(UInt8(ascii: "f"))
    case 0x0A: append(UInt8(ascii: "n"))
    case 0x0D: append(UInt8(ascii: "r"))
    case 0x09: append(UInt8(ascii: "t"))
    default:
      let hex: [UInt8] = Array("0123456789abcdef".utf8)
      append(UInt8(ascii: "u"))
      append(UInt8(ascii: "0"))
      append(UInt8(ascii: "0"))
      append(hex[Int(byte >> 4)])
      append(hex[Int(byte & 0x0F)])
    }
  }
}

extension JSONWriter {
  static let trueBytes = Array("true".utf8)
  static let falseBytes = Array("false".utf8)
  static let nullBytes = Array("null".utf8)
}

extension JSONValue {
  /// Compact UTF-8 encoding of this value.
  public func encoded() -> [UInt8] {
    var writer = JSONWriter()
    writer.value(self)
    return writer.bytes
  }
}
