// Snapshot bytes before they are joined (docs/cluster.md, "Bounded history"). Taking a
// snapshot on the event loop must cost the state's skeleton, not its replay history:
// replay payloads are immutable byte arrays, so the writer keeps a reference to each
// (copy-on-write makes that O(1)) instead of copying it, and the join into one array
// — the part that grows with the replay budget — runs wherever the caller chooses,
// off the loop. The joined bytes are exactly what one sequential `BinaryWriter`
// would have written: the format does not change.

/// A snapshot as written bytes plus byte strings spliced in by reference. Sendable:
/// everything in it is an immutable value, safe to join on another thread.
public struct SnapshotParts: Sendable {
  /// The written bytes, without the spliced strings.
  public private(set) var written: [UInt8]
  /// Each spliced string comes right after `written[0..<at]`; `at` never decreases.
  public private(set) var spliced: [(at: Int, bytes: [UInt8])]

  /// The joined length.
  public private(set) var count: Int

  public init(written: [UInt8], spliced: [(at: Int, bytes: [UInt8])] = []) {
    self.written = written
    self.spliced = spliced
    count = spliced.reduce(written.count) { $0 + $1.bytes.count }
  }

  /// The same parts behind `prefix` (a header that needs the joined length first).
  public func prefixed(with prefix: [UInt8]) -> SnapshotParts {
    SnapshotParts(written: prefix + written, spliced: spliced.map { ($0.at + prefix.count, $0.bytes) })
  }

  /// The bytes in order: O(count), for off the loop.
  public func joined() -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(count)
    var from = 0
    for (at, bytes) in spliced {
      out.append(contentsOf: written[from..<at])
      out.append(contentsOf: bytes)
      from = at
    }
    out.append(contentsOf: written[from...])
    return out
  }
}

extension BinaryWriter {
  /// The size below which a byte string is copied rather than spliced: the entry
  /// for a reference costs about as much as copying a short string.
  public static let spliceThreshold = 64

  /// `bytes(v)` for an immutable array: a long one is left out of `self` and
  /// recorded in `spliced` by reference, to be joined later (`SnapshotParts`).
  public mutating func bytes(_ v: [UInt8], splicingInto spliced: inout [(at: Int, bytes: [UInt8])]) {
    guard v.count >= Self.spliceThreshold else { return bytes(v) }
    count(v.count)
    spliced.append((self.bytes.count, v))
  }
}
