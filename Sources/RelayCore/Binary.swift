// A little-endian byte writer and a reader for untrusted bytes (snapshots of the core,
// docs/cluster.md; the shared log's entries). The reader is a parser of input like
// any socket's (DESIGN.md, "Limits and failures": input never traps): every read
// checks the bytes left first, a length is compared with what remains before
// anything is allocated for it, and sizes become `Int` only through `init(exactly:)`.

/// Why a `BinaryReader` refused its input, and where.
public struct BinaryError: Error, Equatable, Sendable, CustomStringConvertible {
  /// Byte offset of the read that failed.
  public let offset: Int
  public let reason: String

  public init(offset: Int, reason: String) {
    self.offset = offset
    self.reason = reason
  }

  public var description: String { "at byte \(offset): \(reason)" }
}

/// Appends fixed-width little-endian integers and length-prefixed byte strings.
public struct BinaryWriter: Sendable {
  public private(set) var bytes: [UInt8] = []

  public init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

  public mutating func u8(_ v: UInt8) { bytes.append(v) }

  public mutating func bool(_ v: Bool) { bytes.append(v ? 1 : 0) }

  public mutating func u32(_ v: UInt32) {
    withUnsafeBytes(of: v.littleEndian) { raw($0) }
  }

  public mutating func u64(_ v: UInt64) {
    withUnsafeBytes(of: v.littleEndian) { raw($0) }
  }

  public mutating func i64(_ v: Int64) { u64(UInt64(bitPattern: v)) }

  /// Forgets what was written; a writer reused for one buffer per loop turn keeps its
  /// capacity.
  public mutating func removeAll(keepingCapacity: Bool) { bytes.removeAll(keepingCapacity: keepingCapacity) }

  /// Each value as `i64` writes it, in one append where the host is little-endian
  /// (a rate window's ring holds as many instants as its limit allows).
  public mutating func i64s(_ v: [Int64]) {
    #if _endian(little)
      v.withUnsafeBytes { raw($0) }
    #else
      for x in v { i64(x) }
    #endif
  }

  /// A count or length: u32 when it fits, which every count of the core does (the
  /// caller's state would have to hold 4 billion elements otherwise).
  public mutating func count(_ n: Int) {
    precondition(n >= 0 && n <= Int(UInt32.max), "count \(n) does not fit a u32")
    u32(UInt32(n))
  }

  /// u32 length, then the bytes.
  public mutating func bytes(_ v: some Collection<UInt8>) {
    count(v.count)
    bytes.append(contentsOf: v)
  }

  /// The bytes as they are, without a length: for joining parts written apart.
  public mutating func raw(_ v: some Collection<UInt8>) { bytes.append(contentsOf: v) }

  /// A borrowed buffer as it is, without a length, in one copy (a raw buffer's
  /// generic `append(contentsOf:)` copies byte by byte).
  public mutating func raw(_ v: UnsafeRawBufferPointer) {
    v.withMemoryRebound(to: UInt8.self) { bytes.append(contentsOf: $0) }
  }

  /// Overwrites the u32 at `offset` (a length or reference known only later).
  public mutating func patchU32(_ v: UInt32, at offset: Int) {
    precondition(offset >= 0 && offset + 4 <= bytes.count, "patch outside the written bytes")
    for i in 0..<4 { bytes[offset + i] = UInt8(truncatingIfNeeded: v >> UInt32(8 * i)) }
  }

  /// Drops the first `n` bytes (cut into a piece of a longer output).
  public mutating func removeFirst(_ n: Int) { bytes.removeFirst(n) }

  /// Overwrites the byte at `offset`.
  public mutating func patchByte(_ v: UInt8, at offset: Int) {
    precondition(offset >= 0 && offset < bytes.count, "patch outside the written bytes")
    bytes[offset] = v
  }

  /// UTF-8, length-prefixed like `bytes`.
  public mutating func string(_ v: String) { bytes(v.utf8) }

  /// A presence byte, then the value when present.
  public mutating func optional<T>(_ v: T?, _ write: (inout BinaryWriter, T) -> Void) {
    bool(v != nil)
    if let v { write(&self, v) }
  }
}

/// Reads what `BinaryWriter` wrote, from bytes nobody vouches for.
public struct BinaryReader: Sendable {
  /// All the bytes being read.
  public let input: [UInt8]
  public private(set) var offset = 0

  public init(_ bytes: [UInt8]) { input = bytes }

  public var remaining: Int { input.count - offset }
  public var isAtEnd: Bool { offset == input.count }

  public func error(_ reason: String) -> BinaryError { BinaryError(offset: offset, reason: reason) }

  private mutating func take(_ n: Int) throws(BinaryError) -> ArraySlice<UInt8> {
    guard n >= 0, n <= remaining else { throw error("needs \(n) bytes, \(remaining) left") }
    defer { offset += n }
    return input[offset..<(offset + n)]
  }

  public mutating func u8() throws(BinaryError) -> UInt8 { try take(1).first ?? 0 }

  /// 0 or 1; any other byte is refused, so one state has one encoding.
  public mutating func bool() throws(BinaryError) -> Bool {
    switch try u8() {
    case 0: return false
    case 1: return true
    default: throw error("a bool is 0 or 1")
    }
  }

  public mutating func u32() throws(BinaryError) -> UInt32 {
    var v: UInt32 = 0
    for (i, b) in try take(4).enumerated() { v |= UInt32(b) << UInt32(8 * i) }
    return v
  }

  public mutating func u64() throws(BinaryError) -> UInt64 {
    var v: UInt64 = 0
    for (i, b) in try take(8).enumerated() { v |= UInt64(b) << UInt64(8 * i) }
    return v
  }

  public mutating func i64() throws(BinaryError) -> Int64 { Int64(bitPattern: try u64()) }

  /// A count of elements that each take at least `minBytes` of the input: refused
  /// when the input left could not hold that many, so a forged count never sizes an
  /// allocation or a loop beyond the input's own length.
  public mutating func count(minBytes: Int = 1) throws(BinaryError) -> Int {
    let raw = try u32()
    guard let n = Int(exactly: raw), n <= remaining / max(1, minBytes) else {
      throw error("count \(raw) exceeds the \(remaining) bytes left")
    }
    return n
  }

  public mutating func bytes() throws(BinaryError) -> [UInt8] {
    let n = try count(minBytes: 1)
    return Array(try take(n))
  }

  /// Refuses bytes that are not UTF-8 (a repaired string would not round-trip).
  public mutating func string() throws(BinaryError) -> String {
    let start = offset
    let raw = try bytes()
    guard let s = String(validating: raw, as: UTF8.self) else {
      throw BinaryError(offset: start, reason: "string is not UTF-8")
    }
    return s
  }

  public mutating func optional<T>(_ read: (inout BinaryReader) throws(BinaryError) -> T) throws(BinaryError) -> T? {
    try bool() ? try read(&self) : nil
  }

  /// Refuses trailing bytes: a snapshot is exactly one state.
  public func expectEnd() throws(BinaryError) {
    guard isAtEnd else { throw error("\(remaining) unexpected bytes after the end") }
  }
}
