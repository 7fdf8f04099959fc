// Snapshot bytes before they are written in full (docs/cluster.md, "Bounded history").
// Taking a snapshot on the event loop must cost little whatever the state: the loop
// writes the small fixed parts, and captures the rest as values without encoding,
// sorting or numbering anything: each session's replay log as it is (`ReplayChunks`:
// O(1) per session, the events shared, not visited), the replay budget's eviction
// order, each session's rate windows (a table of values, shared), and the plain
// records kept for connections, users and members (SnapshotCache.swift; no hashing:
// the profile table's numbering and every sort are left to `joined()`).
// `joined()` — wherever the caller runs it, off the loop — numbers the profiles in
// first use, writes the profile table in front, the captured sections in order, and
// gives exactly the bytes one sequential writer would have: the format does not change.

import RelayPrimitives

/// A connection as a snapshot writes it (SnapshotEncode.swift), copied on the loop.
struct ConnectionRecord: Sendable {
  let id: UInt64
  let profile: Profile?
  let sessions: SmallList<String>
  let lastInboundMonoMs: Int64
  let phase: UInt8
  let tokenSpent: Bool
  let background: Bool
  let device: String?
  let badMessages: UInt32
  let joinWindow: RateWindow

  init(_ c: Connection) {
    id = c.id.raw
    profile = c.profile
    sessions = c.sessions
    lastInboundMonoMs = c.lastInboundMonoMs
    phase = SnapshotWriter.phaseCode(c.phase)
    tokenSpent = c.tokenSpent
    background = c.background
    device = c.device
    badMessages = UInt32(clamping: c.badMessages)
    joinWindow = c.joinWindow
  }
}

/// A session member as a snapshot writes it, copied on the loop.
struct MemberRecord: Sendable {
  let profile: Profile
  let joinedAtWallMs: Int64
  let connection: UInt64?

  init(_ p: Participant) {
    profile = p.profile
    joinedAtWallMs = p.joinedAtWallMs
    connection = p.connection?.raw
  }
}

/// The users' connections as (uid, connection) pairs in buckets (SnapshotCache.swift):
/// each user's pairs together in one bucket, in hello order; grouped and sorted by
/// `joined()`.
struct UserConnections: Sendable {
  struct Pair: Sendable {
    let uid: String
    let id: UInt64
  }

  let buckets: [[Pair]]

  init(buckets: [[Pair]]) { self.buckets = buckets }

  /// In one pass over the multimap (each user's in hello order, users interleaved).
  init(_ table: RefTable<ConnectionsByUid>) {
    buckets = [table.inRunOrder().map { Pair(uid: $0.uid ?? "", id: $0.id.raw) }]
  }

  var count: Int { buckets.reduce(0) { $0 + $1.count } }

  /// Users in ascending order, each with its connections in hello order.
  func grouped() -> [(uid: String, ids: [UInt64])] {
    let pairs = Array(buckets.joined())
    let order = pairs.indices.sorted { (pairs[$0].uid, $0) < (pairs[$1].uid, $1) }
    var groups: [(uid: String, ids: [UInt64])] = []
    for i in order {
      if groups.last?.uid == pairs[i].uid { groups[groups.count - 1].ids.append(pairs[i].id) } else {
        groups.append((pairs[i].uid, [pairs[i].id]))
      }
    }
    return groups
  }
}

/// A part of a snapshot that the loop captured and `joined()` writes.
enum DeferredSection: Sendable {
  /// The profile table: every profile the snapshot refers to, in first-use order.
  case profiles
  /// Every connection, in buckets, in any order (written by id).
  case connections([[ConnectionRecord]])
  /// Each user's connections.
  case userConnections(UserConnections)
  /// One session's members, in join order.
  case members([MemberRecord])
  /// One session's rate windows, in any order (written by uid).
  case windows([String: RateWindows])
  /// One session's replay log.
  case replay(ReplayCapture)
  /// The replay budget's live eviction records, as session indexes.
  case evictionOrder(ReplayBudget.Order)
}

/// A snapshot as written bytes plus sections to be written later. Sendable: all of it
/// is immutable values, safe to finish on another thread.
public struct SnapshotParts: Sendable {
  /// What the loop wrote: no profile reference (every one is in a section).
  let written: [UInt8]
  /// Each section comes right after `written[0..<at]`; `at` never decreases.
  let sections: [(at: Int, section: DeferredSection)]
  /// Written before the snapshot, followed by the snapshot's length as a u32
  /// (`framed(by:)`).
  private(set) var header: [UInt8]?

  init(written: [UInt8], sections: [(at: Int, section: DeferredSection)]) {
    self.written = written
    self.sections = sections
  }

  /// The snapshot behind `header` and its length (`BinaryWriter.count`), as a
  /// container writes a nested one: `header + count(n) + snapshot`.
  public func framed(by header: [UInt8]) -> SnapshotParts {
    var framed = self
    framed.header = header
    return framed
  }

  /// About the joined length, for one allocation.
  private var capacity: Int {
    let replay = sections.reduce(0) { sum, entry in
      switch entry.section {
      // Per event: at most the log's own cost of it, plus 4 for its eviction record.
      case .replay(let log): return sum + 12 + log.bytes + 4 * log.events.count
      case .connections(let all): return sum + 128 * all.reduce(0) { $0 + $1.count }
      case .userConnections(let users): return sum + 32 * users.count
      case .members(let all): return sum + 4 + 128 * all.count  // a profile's table entry too
      case .windows(let all): return sum + 4 + 64 * all.count
      default: return sum
      }
    }
    return (header?.count ?? 0) + 4 + written.count + replay
  }

  /// The bytes in order: O(snapshot), for off the loop.
  public func joined() -> [UInt8] {
    var joiner = SnapshotJoiner(parts: self, capacity: capacity, pieceBytes: Int.max)
    joiner.numberProfiles()
    joiner.write()
    return joiner.out.bytes
  }

  /// The bytes of `joined()` in pieces of `pieceBytes` (the last one shorter), never
  /// held in one array: a snapshot of hundreds of megabytes is uploaded piece by
  /// piece, and one allocation of its whole size (and its release) is avoided.
  public func joined(pieceBytes: Int) -> [[UInt8]] {
    precondition(pieceBytes > 0, "pieces of at least one byte")
    var joiner = SnapshotJoiner(parts: self, capacity: min(capacity, 2 * pieceBytes), pieceBytes: pieceBytes)
    joiner.numberProfiles()
    joiner.write()
    return joiner.finishPieces()
  }
}

/// Finishes one `SnapshotParts` (`joined()`).
private struct SnapshotJoiner {
  let parts: SnapshotParts
  var out: BinaryWriter
  /// Final profile numbers: first use over the whole snapshot.
  private var numbered: [Profile] = []
  private var number: [ObjectIdentifier: UInt32] = [:]
  /// Full pieces already cut from the front of `out` (`spill()`), and their bytes.
  private var pieces: [[UInt8]] = []
  private let pieceBytes: Int
  private var spilled = 0

  init(parts: SnapshotParts, capacity: Int, pieceBytes: Int) {
    self.parts = parts
    self.pieceBytes = pieceBytes
    out = BinaryWriter(capacity: capacity)
  }

  /// Cuts the full pieces off the front of `out`. Called only where no patch of
  /// bytes already written is pending (between sections and events), except the
  /// snapshot's length, which `write()` patches through `patchU32(_:atTotal:)`.
  private mutating func spill() {
    guard out.bytes.count >= pieceBytes else { return }
    var at = 0
    while out.bytes.count - at >= pieceBytes {
      pieces.append(Array(out.bytes[at..<(at + pieceBytes)]))
      at += pieceBytes
    }
    out.removeFirst(at)
    spilled += at
  }

  /// The bytes written so far, cut and uncut.
  private var total: Int { spilled + out.bytes.count }

  /// Overwrites the u32 at `offset` of the whole output, cut or not.
  private mutating func patchU32(_ v: UInt32, atTotal offset: Int) {
    guard offset < spilled else { return out.patchU32(v, at: offset - spilled) }
    for i in 0..<4 {
      let at = offset + i
      let byte = UInt8(truncatingIfNeeded: v >> UInt32(8 * i))
      if at < spilled { pieces[at / pieceBytes][at % pieceBytes] = byte } else { out.patchByte(byte, at: at - spilled) }
    }
  }

  /// Every piece, the uncut rest last (none when the output is empty).
  mutating func finishPieces() -> [[UInt8]] {
    spill()
    if !out.bytes.isEmpty { pieces.append(out.bytes) }
    return pieces
  }

  /// The captured connections by id (`numberProfiles()` sorts them).
  private var connections: [ConnectionRecord] = []

  /// Numbers every profile in first-use order over the joined bytes: the references
  /// in the connections, members and replay sections, in their order.
  mutating func numberProfiles() {
    for (_, section) in parts.sections {
      switch section {
      case .connections(let all):
        connections = all.joined().sorted { $0.id < $1.id }
        for c in connections { if let p = c.profile { use(p) } }
      case .members(let all):
        for m in all { use(m.profile) }
      case .replay(let log):
        log.events.forEach { event in if case .joined(let p, _) = event.body { use(p) } }
      default: continue
      }
    }
  }

  private mutating func use(_ p: Profile) {
    let key = ObjectIdentifier(p)
    guard number[key] == nil else { return }
    number[key] = UInt32(numbered.count)
    numbered.append(p)
  }

  private func finalNumber(_ p: Profile) -> UInt32 { Self.finalNumber(p, number) }

  private static func finalNumber(_ p: Profile, _ number: [ObjectIdentifier: UInt32]) -> UInt32 {
    guard let n = number[ObjectIdentifier(p)] else { preconditionFailure("profile not numbered") }
    return n
  }

  mutating func write() {
    if let header = parts.header {
      out.raw(header)
      out.u32(0)  // the length, once known
    }
    let start = total
    var from = 0
    // Sessions come in snapshot order: the eviction records name them by index.
    var logs: [UInt64: (index: UInt32, oldestSeq: Int64)] = [:]
    var sessionIndex: UInt32 = 0
    for (at, section) in parts.sections {
      copyWritten(from..<at)
      from = at
      switch section {
      case .profiles:
        out.count(numbered.count)
        for p in numbered { out.profile(p) }
        spill()
      case .connections:
        out.count(connections.count)
        let numbers = number  // not `self` inside the closure: `out` is being written
        for c in connections {
          out.connection(c) { Self.finalNumber($0, numbers) }
          spill()
        }
      case .userConnections(let users):
        out.userConnections(users)
        spill()
      case .members(let all):
        let numbers = number
        out.members(all) { Self.finalNumber($0, numbers) }
        spill()
      case .windows(let all):
        out.windows(all)
        spill()
      case .replay(let log):
        if let oldest = log.oldestSeq { logs[log.serial] = (sessionIndex, oldest) }
        sessionIndex += 1
        replay(log)
      case .evictionOrder(let order):
        let records = ReplayBudget.liveRecords(order, logs: logs)
        out.count(records.count)
        for i in records { out.u32(i) }
        spill()
      }
    }
    copyWritten(from..<parts.written.count)
    if parts.header != nil { patchU32(UInt32(total - start), atTotal: start - 4) }
  }

  private mutating func copyWritten(_ range: Range<Int>) {
    out.raw(parts.written[range])
    spill()
  }

  private mutating func replay(_ log: ReplayCapture) {
    out.i64(log.oldestSeq ?? 0)
    out.count(log.events.count)
    log.events.forEach { event in
      out.i64(event.atMonoMs)
      switch event.body {
      case .payload(let payload):
        out.u8(0)
        out.bytes(payload.bytes)
      case .joined(let p, let wallMs):
        out.u8(1)
        out.u32(finalNumber(p))
        out.i64(wallMs)
      }
      spill()
    }
  }
}
