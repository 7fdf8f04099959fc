// The files of a data dir and which of them a restart reads (docs/operating.md,
// "Data dir"). Snapshots and log segments are named by position, zero-padded so names
// sort as numbers:
// - `snapshot-P.snap`: the replicated state right after the record at position P;
// - `log-S.log`: records from position S on, until the next segment's start;
// - `*.tmp`: a snapshot being written (renamed once complete, else ignored).
// A new segment starts after each snapshot, so a segment is either wholly covered by
// a snapshot or not at all. The two newest snapshots are kept, and the segments the
// older one does not cover: if the newest snapshot turns out unreadable, the older
// one plus those segments still give the whole state.

/// One file of a data dir, by name.
public enum DataDirFile: Equatable, Sendable {
  case snapshot(position: UInt64)
  case log(start: UInt64)
  case temporary
  /// `relay.lock`, files set aside as damaged, anything else: left alone.
  case other

  static let digits = 20

  public init(name: String) {
    if name.hasSuffix(".tmp") {
      self = .temporary
    } else if let p = Self.number(name, prefix: "snapshot-", suffix: ".snap") {
      self = .snapshot(position: p)
    } else if let s = Self.number(name, prefix: "log-", suffix: ".log"), s > 0 {
      self = .log(start: s)
    } else {
      self = .other
    }
  }

  public var name: String {
    switch self {
    case .snapshot(let p): return "snapshot-\(Self.padded(p)).snap"
    case .log(let s): return "log-\(Self.padded(s)).log"
    case .temporary, .other: return ""
    }
  }

  static func padded(_ n: UInt64) -> String {
    let s = String(n)
    return String(repeating: "0", count: max(0, digits - s.count)) + s
  }

  private static func number(_ name: String, prefix: String, suffix: String) -> UInt64? {
    guard name.hasPrefix(prefix), name.hasSuffix(suffix) else { return nil }
    let middle = name.dropFirst(prefix.count).dropLast(suffix.count)
    guard middle.count == digits, middle.allSatisfy({ $0.isASCII && $0.isNumber }) else { return nil }
    return UInt64(middle)
  }
}

/// A data dir's snapshots and segments, sorted.
public struct DataDirLayout: Equatable, Sendable {
  public private(set) var snapshots: [UInt64] = []
  public private(set) var segments: [UInt64] = []
  public private(set) var temporaries: [String] = []

  public init(names: [String]) {
    for name in names {
      switch DataDirFile(name: name) {
      case .snapshot(let p): snapshots.append(p)
      case .log(let s): segments.append(s)
      case .temporary: temporaries.append(name)
      case .other: break
      }
    }
    snapshots.sort()
    segments.sort()
  }

  public var isEmpty: Bool { snapshots.isEmpty && segments.isEmpty }

  /// Snapshots to try at start, newest first; position 0 (the empty state) last.
  public var startCandidates: [UInt64] { snapshots.reversed() + [0] }

  /// The segments to replay after the snapshot at `position`, in order: the one that
  /// holds `position + 1` (the last starting at or before it) and every later one.
  public func segments(after position: UInt64) -> [UInt64] {
    guard let first = segments.lastIndex(where: { $0 <= position + 1 }) else { return segments }
    return Array(segments[first...])
  }

  /// What may go once a snapshot at `newest` is durable: snapshots older than the one
  /// before it, and segments wholly covered by that one (their successor starts at or
  /// before its position + 1). With a single snapshot, nothing is covered twice, so
  /// only older snapshots could go (there are none).
  public func obsolete(afterSnapshot newest: UInt64) -> (snapshots: [UInt64], segments: [UInt64]) {
    let kept = snapshots.filter { $0 <= newest }
    guard kept.count >= 2 else { return ([], []) }
    let fallback = kept[kept.count - 2]
    let oldSnapshots = snapshots.filter { $0 < fallback }
    var oldSegments: [UInt64] = []
    for (i, start) in segments.enumerated() where i + 1 < segments.count && segments[i + 1] <= fallback + 1 {
      oldSegments.append(start)
    }
    return (oldSnapshots, oldSegments)
  }
}
