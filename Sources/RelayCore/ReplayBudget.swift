// The process-wide bound on replay memory (§8 resume): every session's log charges its
// kept events here, and past `maxBytes` the oldest events of all sessions go first.
// A resume that needs a dropped event gets a fresh snapshot with `recovered: false`,
// as the contract allows. Eviction follows recording order, so it is as deterministic
// as the rest of the core.

import RelayPrimitives

/// Replay bytes of all sessions, and the order their events were recorded in.
final class ReplayBudget {
  /// `--replay-budget-bytes`; 0 = no process-wide bound.
  let maxBytes: Int
  /// Bytes charged by every live session's log.
  private(set) var bytes = 0
  /// Events dropped to stay under a byte bound (this one or a log's own).
  private(set) var evictions: UInt64 = 0

  /// One recorded event: its log (by serial: a freed session's log is gone, and its
  /// records are then simply stale) and seq. Plain values, so a snapshot can take
  /// the whole order by reference and read it on another thread.
  struct Record: Sendable {
    let log: UInt64
    let seq: Int64
  }
  /// Recording order, in chunks a capture shares (`ChunkedQueue`): the first record
  /// after a capture copies the tail chunk, not the whole order.
  typealias Order = ChunkedQueue<Record>
  /// Records per chunk: near the square root of an order of a million records, so the
  /// tail chunk and the chunk list a capture makes the loop copy both stay short.
  static let orderChunkSize = 1_024
  private var order = Order(chunkSize: orderChunkSize)
  /// Live events across all logs: `order` is compacted when mostly stale.
  private var liveEvents = 0
  /// The sessions whose logs records name, while they live (`register`, `forget`).
  private var owners: [UInt64: Owner] = [:]
  private struct Owner {
    weak var session: Session?
  }
  private var nextSerial: UInt64 = 1

  init(maxBytes: Int) { self.maxBytes = maxBytes }

  func charge(_ n: Int, events: Int) {
    bytes += n
    liveEvents += events
    if let broken = Self.violation(bytes: bytes, liveEvents: liveEvents) { fatalError(broken) }
  }

  /// The budget's accounting invariant, by name: what the logs gave back never
  /// exceeds what they charged.
  static func violation(bytes: Int, liveEvents: Int) -> String? {
    guard bytes < 0 || liveEvents < 0 || (liveEvents == 0 && bytes != 0) else { return nil }
    return "replay budget accounting: \(bytes) bytes for \(liveEvents) events"
  }

  /// The budget's bound after an eviction pass, by name: over `maxBytes` only when
  /// no recorded event is left to evict.
  static func violation(bytes: Int, maxBytes: Int, recordsLeft: Int) -> String? {
    guard maxBytes > 0, bytes > maxBytes, recordsLeft > 0 else { return nil }
    return "replay budget bound: \(bytes) bytes kept, at most \(maxBytes), with \(recordsLeft) events left to evict"
  }

  func countEviction() { evictions += 1 }

  /// A name for a new log's records; never reused, so a stale record never names a
  /// newer log. Not state: a restored core numbers its logs afresh.
  func newSerial() -> UInt64 {
    defer { nextSerial += 1 }
    return nextSerial
  }

  /// The session whose log is `session.replay.serial` (evictions reach it through this).
  func register(_ session: Session) {
    guard maxBytes > 0 else { return }
    owners[session.replay.serial] = Owner(session: session)
  }

  /// The log is being freed: its records are stale from now on.
  func forget(_ serial: UInt64) { owners[serial] = nil }

  private func owner(of record: Record) -> Session? { owners[record.log]?.session }

  /// A log recorded an event (its bytes already charged); evicts while over budget.
  func recorded(_ session: Session, seq: Int64) {
    guard maxBytes > 0 else { return }
    order.append(Record(log: session.replay.serial, seq: seq))
    while bytes > maxBytes, let record = order.popFirst() {
      guard let owner = owner(of: record), owner.replay.oldestSeq == record.seq else { continue }
      owner.replay.dropOldestForBudget()
    }
    if let broken = Self.violation(bytes: bytes, maxBytes: maxBytes, recordsLeft: order.count) {
      fatalError(broken)
    }
    compactIfMostlyStale()
  }

  /// The eviction order as it is now, for a snapshot: O(1) here, filtered later
  /// (`liveRecords`), on any thread.
  var capturedOrder: Order { order }

  /// The records of events still kept, in recording order: the eviction order. Records
  /// of dropped events or freed sessions are left out; eviction passes over them, so
  /// they change nothing (for snapshots). `logs`: the captured logs by serial, with
  /// their index in the snapshot and their oldest kept seq then.
  static func liveRecords(
    _ order: Order, logs: [UInt64: (index: UInt32, oldestSeq: Int64)]
  ) -> [UInt32] {
    var live: [UInt32] = []
    order.forEach { record in
      guard let log = logs[record.log], record.seq >= log.oldestSeq else { return }
      live.append(log.index)
    }
    return live
  }

  /// Puts back the eviction order and count of a snapshot. The logs charge their
  /// bytes themselves as they are restored (`ReplayLog.restore`).
  func restore(evictions: UInt64, records: [(session: Session, seq: Int64)]) {
    self.evictions = evictions
    order = Order(chunkSize: Self.orderChunkSize, records.lazy.map { Record(log: $0.session.replay.serial, seq: $0.seq) })
  }

  /// Records of events a log already dropped by its own bounds stay until passed over;
  /// rebuild once they outnumber the live ones, so `order` stays O(live events) and
  /// the rebuild amortized O(1) per record. The rebuild is a fresh queue: it only
  /// reads the old one, so chunks a capture shares are never copied for it.
  private func compactIfMostlyStale() {
    let kept = order.count
    guard kept > 1_024, kept > 2 * liveEvents else { return }
    var live = Order(chunkSize: Self.orderChunkSize)
    order.forEach { record in
      guard let owner = owner(of: record), let oldest = owner.replay.oldestSeq, record.seq >= oldest else { return }
      live.append(record)
    }
    order = live
  }
}
