// protocol/PROTOCOL.md §5: the server pings every socket each heartbeat interval and
// a socket with no inbound frame for the heartbeat timeout is dead. Liveness is a
// property of one process's sockets, not of the shared state: the shell owns this one
// machine in every mode (standalone, `--data-dir`, cluster), drops a dead socket
// itself, and the core hears of it as the ordinary `closed(clean: false)` input.
//
// Cost model (DESIGN.md, "The hot path"): an inbound frame only stores its time into
// the connection's slot (O(1), no hashing); each connection has exactly one check
// outstanding, which re-arms itself lazily from that stored time when it fires.
// Checks are rounded up to a coarse quantum, so all the connections due in one quantum
// are checked in one firing: 20 000 idle sockets cost tens of wake-ups per interval,
// not thousands, and their pongs arrive batched (uWebSockets times idle sockets the
// same way). The wheel below holds one bucket per instant; a new check almost always
// lands in the last bucket (now + interval), so filing is an append and firing a
// linear scan, with no heap sift and no lookup by id.

/// The §5 heartbeat checks of one process's connections, keyed by connection id.
public struct Heartbeats {
  /// A connection's place in the machine, returned by `opened`: `inbound` stores
  /// through it without a lookup. A slot closed and reused by a later connection has
  /// a new generation, so a stale handle or a stale check touches nothing.
  public struct Slot: Equatable, Sendable {
    @usableFromInline let index: Int32
    @usableFromInline let generation: UInt32

    @inlinable init(index: Int32, generation: UInt32) {
      self.index = index
      self.generation = generation
    }

    /// No slot: what a connection holds before it opens (inbound through it is ignored).
    public static let none = Slot(index: -1, generation: 0)
  }

  /// What one call of `due` found: connections to ping, and silent ones past the
  /// timeout (each reported once; the shell drops it and then calls `closed`).
  public struct Due: Equatable, Sendable {
    public var ping: [UInt64] = []
    public var timedOut: [UInt64] = []
    public init() {}
  }

  @usableFromInline struct Record {
    @usableFromInline var lastInboundMs: Int64
    @usableFromInline var generation: UInt32
    @usableFromInline var open: Bool
    @usableFromInline var id: UInt64
  }

  struct Check {
    let index: Int32
    let generation: UInt32
    let pingDueMs: Int64
  }

  struct Bucket {
    let atMs: Int64
    var checks: [Check]
    /// Checks before this index have fired.
    var next = 0
  }

  /// `--heartbeat-interval` and `--heartbeat-timeout`; a value ≤ 0 disables that half.
  public let intervalMs: Int64
  public let timeoutMs: Int64
  /// Checks fall on multiples of this (`quantum`).
  public let quantumMs: Int64
  /// At most this many checks, and at most `maxTimeoutsPerCall` timeouts, per `due`
  /// call: a mass expiry (a network partition silencing thousands of sockets at once)
  /// is spread over several loop turns, as the core spreads its own deadlines
  /// (`CoreConfig.maxDeadlinesPerTick`). A timeout costs more than a ping: each
  /// becomes a `closed` input whose `participant.lost` may reach a whole session.
  public let maxChecksPerCall: Int
  public let maxTimeoutsPerCall: Int

  @usableFromInline var records: [Record] = []
  private var freeSlots: [Int32] = []
  /// Live buckets, in ascending time.
  private var buckets = FIFOQueue<Bucket>()
  /// An emptied bucket's storage, reused by the next new bucket: one bucket empties
  /// per quantum and about as many checks are filed again.
  private var spare: [Check] = []
  /// Checks queued, stale ones (of closed connections) not yet discarded included.
  public private(set) var pendingChecks = 0
  /// Connections opened and not closed.
  public private(set) var openCount = 0

  public init(intervalMs: Int64, timeoutMs: Int64, maxChecksPerCall: Int = .max, maxTimeoutsPerCall: Int = .max) {
    self.intervalMs = intervalMs
    self.timeoutMs = timeoutMs
    self.quantumMs = Self.quantum(intervalMs: intervalMs, timeoutMs: timeoutMs)
    self.maxChecksPerCall = max(1, maxChecksPerCall)
    self.maxTimeoutsPerCall = max(1, maxTimeoutsPerCall)
  }

  /// A tenth of the shorter heartbeat setting, at most 1 000 ms: pings go out at most
  /// that late, and a silent connection is lost at most that long after its timeout.
  public static func quantum(intervalMs: Int64, timeoutMs: Int64) -> Int64 {
    let settings = [intervalMs, timeoutMs].filter { $0 > 0 }
    guard let shortest = settings.min() else { return 1 }
    return max(1, min(1_000, shortest / 10))
  }

  /// Whether either half is on; off, the machine holds nothing and never fires.
  public var isEnabled: Bool { intervalMs > 0 || timeoutMs > 0 }

  /// When the earliest check is due (monotonic ms); nil when none is queued. It may
  /// be in the past after a `due` call that stopped at a bound.
  public var nextDeadlineMs: Int64? { buckets.first?.atMs }

  // MARK: Inputs

  /// A WebSocket opened (the upgrade, before `hello`: a socket waiting for it may die
  /// too). Its first ping is due an interval later.
  public mutating func opened(_ id: UInt64, nowMs: Int64) -> Slot {
    guard isEnabled else { return .none }
    let slot: Slot
    if let index = freeSlots.popLast() {
      records[Int(index)].lastInboundMs = nowMs
      records[Int(index)].open = true
      records[Int(index)].id = id
      slot = Slot(index: index, generation: records[Int(index)].generation)
    } else {
      records.append(Record(lastInboundMs: nowMs, generation: 0, open: true, id: id))
      slot = Slot(index: Int32(records.count - 1), generation: 0)
    }
    openCount += 1
    schedule(slot.index, slot.generation, lastInboundMs: nowMs, pingDueMs: nowMs + intervalMs)
    return slot
  }

  /// Any inbound frame (§5: pongs, pings, messages, close) proves liveness: a store.
  @inlinable
  public mutating func inbound(_ slot: Slot, nowMs: Int64) {
    let i = Int(slot.index)
    guard i >= 0, i < records.count, records[i].generation == slot.generation else { return }
    records[i].lastInboundMs = nowMs
  }

  /// The socket is gone: its slot is free for the next connection, and its queued
  /// check, when it comes up, finds a newer generation and is discarded.
  public mutating func closed(_ slot: Slot) {
    let i = Int(slot.index)
    guard i >= 0, i < records.count, records[i].generation == slot.generation, records[i].open else { return }
    records[i].open = false
    records[i].generation &+= 1
    freeSlots.append(slot.index)
    openCount -= 1
  }

  /// Fires the checks due at `nowMs`, earliest first, within the bounds above: a
  /// silent connection past the timeout is reported timed out (and checked no more);
  /// otherwise it is pinged if its ping is due, and its next check is filed from its
  /// latest inbound time (frames in between cost nothing).
  public mutating func due(nowMs: Int64) -> Due {
    var result = Due()
    var checked = 0
    while checked < maxChecksPerCall, result.timedOut.count < maxTimeoutsPerCall,
      let first = buckets.first, first.atMs <= nowMs
    {
      let check = popFirst()
      checked += 1
      let i = Int(check.index)
      guard records[i].generation == check.generation, records[i].open else { continue }
      let last = records[i].lastInboundMs
      if timeoutMs > 0, nowMs - last >= timeoutMs {
        result.timedOut.append(records[i].id)
        continue
      }
      var pingDue = check.pingDueMs
      if intervalMs > 0, nowMs >= pingDue {
        result.ping.append(records[i].id)
        pingDue = nowMs + intervalMs
      }
      schedule(check.index, check.generation, lastInboundMs: last, pingDueMs: pingDue)
    }
    return result
  }

  // MARK: The wheel

  /// The next check is the earlier of "ping due" and "timeout due", a disabled half
  /// not counting, rounded up to the quantum.
  private mutating func schedule(_ index: Int32, _ generation: UInt32, lastInboundMs: Int64, pingDueMs: Int64) {
    var next = Int64.max
    if intervalMs > 0 { next = pingDueMs }
    if timeoutMs > 0 { next = min(next, lastInboundMs + timeoutMs) }
    if next < Int64.max - quantumMs { next = (next + quantumMs - 1) / quantumMs * quantumMs }
    file(at: next, Check(index: index, generation: generation, pingDueMs: pingDueMs))
  }

  private mutating func file(at ms: Int64, _ check: Check) {
    pendingChecks += 1
    let last = buckets.count - 1
    guard last >= 0, buckets[last].atMs >= ms else { return buckets.append(newBucket(ms, check)) }
    // Not later than the last bucket: find it or its place (binary search).
    var low = 0
    var high = last
    while low < high {
      let mid = (low + high) / 2
      if buckets[mid].atMs < ms { low = mid + 1 } else { high = mid }
    }
    if buckets[low].atMs == ms {
      buckets[low].checks.append(check)
    } else {
      buckets.insert(newBucket(ms, check), at: low)
    }
  }

  private mutating func newBucket(_ ms: Int64, _ check: Check) -> Bucket {
    var checks: [Check] = []
    swap(&checks, &spare)
    checks.append(check)
    return Bucket(atMs: ms, checks: checks)
  }

  private mutating func popFirst() -> Check {
    let check = buckets[0].checks[buckets[0].next]
    pendingChecks -= 1
    buckets[0].next += 1
    guard buckets[0].next == buckets[0].checks.count else { return check }
    var emptied: [Check] = []
    swap(&emptied, &buckets[0].checks)
    emptied.removeAll(keepingCapacity: true)
    if emptied.capacity > spare.capacity { spare = emptied }
    buckets.popFirst()
    return check
  }
}
