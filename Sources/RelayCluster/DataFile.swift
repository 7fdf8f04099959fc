// The standalone relay's data dir (`--data-dir`, protocol/PROTOCOL.md §12a,
// docs/operating.md "Data dir"): the cluster's records and snapshots, kept in files
// instead of Redis. This file is the pure part — byte layouts, reading back, names —
// with no file I/O; the shell (RelayServer/DataDir.swift) reads and writes the bytes.
//
// Every file starts with a header that names what wrote it: the file format, the
// record format (`LogBatch.formatVersion`), the snapshot layout
// (`Replica.snapshotVersion`) and the core's rules version, so a relay of another
// version refuses the dir instead of misreading it; and the seed of the replicated
// ids (`LogIdentifiers`), so a replay draws the same ids as the process that logged.
// After the header come frames: a length, a CRC-32 of the payload, the payload. A
// crash mid-write leaves a last frame that is short or fails its check (a torn tail,
// cut off); a frame that fails with good frames after it is damage (reported).
public import RelayCore
import RelayPrimitives

/// What a data file's header says.
public struct DataFileHeader: Equatable, Sendable {
  public enum Kind: Equatable, Sendable {
    case log
    case snapshot

    var magic: [UInt8] { Array((self == .log ? "RELAYLOG" : "RELAYSNP").utf8) }
  }

  /// Bumped whenever the header or frame layout changes.
  public static let fileFormat: UInt16 = 1
  public static let byteCount = 52

  public var kind: Kind
  public var fileFormat: UInt16 = Self.fileFormat
  public var logFormat: UInt8 = LogBatch.formatVersion
  public var snapshotVersion: UInt8 = Replica.snapshotVersion
  public var rules: UInt32
  /// The seed of the replicated ids, 32 bytes.
  public var seed: [UInt8]

  public init(kind: Kind, rules: UInt32, seed: [UInt8]) {
    self.kind = kind
    self.rules = rules
    self.seed = seed
  }

  /// The versions as an operator reads them in a refusal.
  public var versionText: String {
    "file format \(fileFormat), record format \(logFormat), snapshot \(snapshotVersion), rules \(rules)"
  }

  public func encoded() -> [UInt8] {
    var w = BinaryWriter(capacity: Self.byteCount)
    for b in kind.magic { w.u8(b) }
    w.u8(UInt8(fileFormat & 0xff))
    w.u8(UInt8(fileFormat >> 8))
    w.u8(logFormat)
    w.u8(snapshotVersion)
    w.u32(rules)
    let padded = Array(seed.prefix(32)) + [UInt8](repeating: 0, count: max(0, 32 - seed.count))
    for b in padded { w.u8(b) }
    let body = w.bytes
    w.u32(CRC32.checksum(body))
    return w.bytes
  }

  /// What a file's first bytes are.
  public enum Check: Equatable, Sendable {
    case valid(DataFileHeader)
    /// Fewer bytes than a header: a file whose creation was cut short.
    case short
    /// A header that fails its checksum or names another kind of file.
    case damaged
    /// A well-formed header of another version than `expected`'s.
    case foreign(DataFileHeader)
  }

  /// Reads the header at the start of `bytes` and compares its versions with
  /// `expected`'s (the seed is not compared here).
  public static func check(_ bytes: [UInt8], kind: Kind, expected: DataFileHeader) -> Check {
    guard bytes.count >= byteCount else { return .short }
    let body = Array(bytes[0..<(byteCount - 4)])
    guard CRC32.checksum(body) == readU32(bytes, at: byteCount - 4), Array(body[0..<8]) == kind.magic else {
      return .damaged
    }
    var header = DataFileHeader(kind: kind, rules: readU32(bytes, at: 12), seed: Array(body[16..<48]))
    header.fileFormat = UInt16(body[8]) | UInt16(body[9]) << 8
    header.logFormat = body[10]
    header.snapshotVersion = body[11]
    let same = header.fileFormat == expected.fileFormat && header.logFormat == expected.logFormat
      && header.snapshotVersion == expected.snapshotVersion && header.rules == expected.rules
    return same ? .valid(header) : .foreign(header)
  }
}

/// A little-endian u32 at `offset` (the caller checked the bounds).
func readU32(_ bytes: [UInt8], at offset: Int) -> UInt32 {
  var v: UInt32 = 0
  for i in 0..<4 { v |= UInt32(bytes[offset + i]) << UInt32(8 * i) }
  return v
}

func readU64(_ bytes: [UInt8], at offset: Int) -> UInt64 {
  var v: UInt64 = 0
  for i in 0..<8 { v |= UInt64(bytes[offset + i]) << UInt64(8 * i) }
  return v
}

/// Frames: `length u32, crc32 u32, payload`.
public enum DataFrame {
  public static let overhead = 8

  public static func encode(_ payload: [UInt8]) -> [UInt8] {
    var out = header(for: payload)
    out.reserveCapacity(overhead + payload.count)
    out.append(contentsOf: payload)
    return out
  }

  /// The frame's first bytes, for a payload written apart (a snapshot: no copy of it).
  public static func header(for payload: [UInt8]) -> [UInt8] {
    var w = BinaryWriter(capacity: overhead)
    w.u32(UInt32(payload.count))
    w.u32(CRC32.checksum(payload))
    return w.bytes
  }

  /// A log record's payload: its position, its time (Unix ms, the record's `t`), the
  /// encoded `LogBatch`.
  public static func record(position: UInt64, timeMs: Int64, batch: [UInt8]) -> [UInt8] {
    var w = BinaryWriter(capacity: batch.count + 16)
    w.u64(position)
    w.i64(timeMs)
    var out = w.bytes
    out.append(contentsOf: batch)
    return encode(out)
  }

  /// The frame `record(position:timeMs:batch: batch.encoded())` would give, written at
  /// the end of `w` with the batch encoded in place (the durable node's turn buffer:
  /// no array per record). Returns where the encoded batch lies in `w.bytes`.
  public static func appendRecord(position: UInt64, timeMs: Int64, batch: LogBatch, to w: inout BinaryWriter) -> Range<Int> {
    let start = w.bytes.count
    w.u32(0)
    w.u32(0)
    w.u64(position)
    w.i64(timeMs)
    let batchStart = w.bytes.count
    batch.encode(into: &w)
    let end = w.bytes.count
    let crc = w.bytes.withUnsafeBytes { CRC32.checksum(UnsafeRawBufferPointer(rebasing: $0[(start + overhead)..<end])) }
    w.patchU32(UInt32(end - start - overhead), at: start)
    w.patchU32(crc, at: start + 4)
    return batchStart..<end
  }
}

extension DataFrame {
  /// The frame `record(position:timeMs:batch:)` gives for a batch of one socket
  /// message (`LogBatch(node:inputs: [.text(connection:, text)])`), written at the end
  /// of `w` from a borrowed buffer (the socket's read buffer): the fixed fields in one
  /// copy, the text in another, the checksum computed on the way (no patching).
  /// Returns where the batch lies in `w.bytes`. The layout is `LogBatch.encode`'s.
  public static func appendTextRecord(
    position: UInt64, timeMs: Int64, node: UInt32, connection: UInt64, text: UnsafeRawBufferPointer,
    to w: inout BinaryWriter
  ) -> Range<Int> {
    // length, crc | position, time | version, node, input length | kind, connection, text length
    let fixed = overhead + 16 + 9 + LogBatch.textInputOverhead
    var head: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0, 0, 0)
    withUnsafeMutableBytes(of: &head) { h in
      h.storeBytes(of: UInt32(truncatingIfNeeded: fixed - overhead + text.count).littleEndian, toByteOffset: 0, as: UInt32.self)
      h.storeBytes(of: position.littleEndian, toByteOffset: 8, as: UInt64.self)
      h.storeBytes(of: UInt64(bitPattern: timeMs).littleEndian, toByteOffset: 16, as: UInt64.self)
      h.storeBytes(of: LogBatch.formatVersion, toByteOffset: 24, as: UInt8.self)
      h.storeBytes(of: node.littleEndian, toByteOffset: 25, as: UInt32.self)
      h.storeBytes(of: UInt32(truncatingIfNeeded: LogBatch.textInputOverhead + text.count).littleEndian, toByteOffset: 29, as: UInt32.self)
      h.storeBytes(of: LogBatch.textKind, toByteOffset: 33, as: UInt8.self)
      h.storeBytes(of: connection.littleEndian, toByteOffset: 34, as: UInt64.self)
      h.storeBytes(of: UInt32(truncatingIfNeeded: text.count).littleEndian, toByteOffset: 42, as: UInt32.self)
      let crc = CRC32.checksum(text, continuing: CRC32.checksum(UnsafeRawBufferPointer(rebasing: h[overhead..<fixed])))
      h.storeBytes(of: crc.littleEndian, toByteOffset: 4, as: UInt32.self)
    }
    let start = w.bytes.count
    withUnsafeBytes(of: &head) { w.raw(UnsafeRawBufferPointer(rebasing: $0[..<fixed])) }
    w.raw(text)
    return (start + overhead + 16)..<w.bytes.count
  }
}

/// How a file's frames ended, when not cleanly at its end.
public enum DataFileDamage: Equatable, Sendable {
  /// The last frame is cut short or fails its check with nothing after it: a crash
  /// mid-write. `offset`: where the good part ends.
  case tornTail(offset: Int)
  /// A frame fails its check with bytes after it: the file was damaged after it was
  /// written; everything from `offset` on is unusable.
  case corrupt(offset: Int)

  public var offset: Int {
    switch self {
    case .tornTail(let o), .corrupt(let o): return o
    }
  }
}

/// Reads the frames of one file's bytes in order, checking each; never traps on any
/// bytes (Fuzz/Sources/FuzzDataFile).
public struct DataFileReader {
  public let bytes: [UInt8]
  public private(set) var offset: Int
  public private(set) var damage: DataFileDamage?

  /// `from`: where the frames start (after the header).
  public init(_ bytes: [UInt8], from: Int = DataFileHeader.byteCount) {
    self.bytes = bytes
    self.offset = min(max(0, from), bytes.count)
  }

  /// The next frame's payload range, or nil at the end or at damage (`damage` set).
  public mutating func next() -> Range<Int>? {
    guard damage == nil, offset < bytes.count else { return nil }
    let left = bytes.count - offset
    guard left >= DataFrame.overhead else { return stop(torn: true) }
    let length = Int(readU32(bytes, at: offset))
    let start = offset + DataFrame.overhead
    guard length <= bytes.count - start else { return stop(torn: true) }
    let range = start..<(start + length)
    guard CRC32.checksum(bytes[range]) == readU32(bytes, at: offset + 4) else {
      return stop(torn: range.upperBound == bytes.count)
    }
    offset = range.upperBound
    return range
  }

  private mutating func stop(torn: Bool) -> Range<Int>? {
    damage = torn ? .tornTail(offset: offset) : .corrupt(offset: offset)
    return nil
  }

  /// The next log record, or nil (at the end, at damage, or a frame too short to be
  /// a record: then `damage` says corrupt).
  public mutating func nextRecord() -> RawRecord? {
    guard let frame = nextRecordFrame() else { return nil }
    return RawRecord(
      id: "disk-\(frame.position)", batch: Array(bytes[frame.batch]),
      position: Array(String(frame.position).utf8), timeMs: Array(String(frame.timeMs).utf8))
  }

  /// `nextRecord()` as numbers and the batch's range in `bytes`, for
  /// `Replica.apply(batch:position:timeMs:)` (a replay formats no decimals).
  public mutating func nextRecordFrame() -> (position: UInt64, timeMs: Int64, batch: Range<Int>)? {
    let at = offset
    guard let range = next() else { return nil }
    guard range.count > 16 else {
      damage = .corrupt(offset: at)
      return nil
    }
    let position = readU64(bytes, at: range.lowerBound)
    let time = Int64(bitPattern: readU64(bytes, at: range.lowerBound + 8))
    return (position, time, (range.lowerBound + 16)..<range.upperBound)
  }
}
