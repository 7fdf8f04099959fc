// A snapshot of the core's state (docs/cluster.md, "Limits": the shared log is bounded
// by snapshots; a joining replica restores the newest one and replays only the tail).
// The bytes are canonical, a function of the logical state only, because replicas
// compare digests of them to detect divergence:
// - no table is written in hash order (Swift seeds hashing per process): dictionaries
//   by sorted key, lists in the order the core keeps (join order, hello order, queue
//   order, recording order), deadlines by (time, order number);
// - caches are left out (fan-out lists, snapshot chunks, encoded `call.incoming`),
//   and moot deadlines too (lazy cancellation: a continuously running core may still
//   hold some a restored one never had; moot never turns wanted again, every id they
//   name being drawn from a counter or the id source once);
// - shared `Profile`s are written once, in first-use order, and referred to by index.
// Config is not in it: it comes from flags, the same on every node.
// Effects not yet taken are output, not state: take them before snapshotting.
//
// One function per stored type, with its reader in SnapshotDecode.swift: a new stored
// field is one line in each. Layout (version 1), in order: profiles, connections,
// user → connections, granted sessions, sessions, replay budget, liveness, calls,
// counters, deadlines; version 2 adds push registrations at the end (SnapshotPush.swift),
// a connection's `hello.device` and a callee's pushed devices.
import RelayProtocol

extension RelayCore {
  /// The first byte of a snapshot; a restore refuses any other.
  public static let snapshotVersion: UInt8 = 2

  /// The core's complete logical state (see the file comment), restorable with
  /// `init(restoring:config:ids:verifyToken:)`. Pure: changes nothing.
  public func snapshot() -> [UInt8] { snapshotParts().joined() }

  /// `snapshot()` with the replay logs captured, not written: what a snapshot costs on
  /// the caller's thread is the state's skeleton, not its replay history
  /// (SnapshotParts.swift). `joined()` gives exactly `snapshot()`, on any thread.
  public func snapshotParts() -> SnapshotParts { snapshotParts(reusing: true) }

  /// `reusing: false` builds every record afresh and leaves the caches alone: the
  /// reference the cached capture must equal byte for byte (SnapshotCache.swift).
  func snapshotParts(reusing: Bool) -> SnapshotParts {
    var writer = SnapshotWriter(core: self, reusing: reusing)
    writer.writeCore()
    return SnapshotParts(written: writer.out.bytes, sections: writer.sections)
  }
}

/// Writes one core; holds the profile and session numbering of this snapshot.
struct SnapshotWriter {
  let core: RelayCore
  var out = BinaryWriter(capacity: 4_096)
  /// The sections `joined()` writes after the bytes before them (SnapshotParts).
  private(set) var sections: [(at: Int, section: DeferredSection)] = []
  let sessions: [Session]
  /// Records captured last time are reused where nothing changed (SnapshotCache.swift).
  let reusing: Bool

  init(core: RelayCore, reusing: Bool) {
    self.core = core
    self.reusing = reusing
    sessions = core.sessions.keys.sorted().compactMap { core.sessions[$0] }
  }

  mutating func writeCore() {
    out.u8(RelayCore.snapshotVersion)
    sections.append((out.bytes.count, .profiles))
    // Connections and users are captured as values, sorted and written by `joined()`:
    // the loop's share is the records changed since the last capture (SnapshotCache).
    sections.append((out.bytes.count, .connections(core.capturedConnections(reusing: reusing))))
    sections.append((out.bytes.count, .userConnections(core.capturedUsers(reusing: reusing))))
    grantedSessions(core.grantedSessions)
    out.count(sessions.count)
    for s in sessions { session(s) }
    replayBudget(core.replayBudget)
    liveness(core.liveness)
    callBook(core.calls)
    coreStats(core.counters)
    deadlines(core.deadlines)
    pushRegistry(core.push)
  }

  // MARK: Connections and users

  static func phaseCode(_ phase: ConnectionPhase) -> UInt8 {
    switch phase {
    case .awaitingHello: return 0
    case .ready: return 1
    case .closing: return 2
    }
  }

  mutating func rateWindow(_ window: RateWindow) { out.rateWindow(window) }

  mutating func grantedSessions(_ grants: [String: Set<String>]) {
    out.count(grants.count)
    for uid in grants.keys.sorted() {
      let ids = grants[uid, default: []].sorted()
      out.string(uid)
      out.count(ids.count)
      for id in ids { out.string(id) }
    }
  }

  // MARK: Sessions

  mutating func session(_ s: Session) {
    out.string(s.id)
    out.i64(s.seq)
    // Members and their rate windows are captured as values (no profile numbering, no
    // sorting here), kept by the session until they change: `joined()` writes them.
    sections.append((out.bytes.count, .members(reusing ? s.memberRecords : s.members.map(MemberRecord.init))))
    out.count(s.hands.count)
    for h in s.hands { hand(h) }
    sections.append((out.bytes.count, .windows(s.rates)))
    rateWindow(s.churnWindow)
    replayLog(s.replay)
  }

  mutating func hand(_ h: Hand) {
    out.string(h.uid)
    out.string(h.name)
    out.i64(h.raisedAtWallMs)
  }

  /// Oldest seq, count, then each event: time, then 0 and its payload, or 1, the
  /// joiner's profile and `joinedAt` (`participant.joined`). Written by `joined()`
  /// from the log as captured now.
  mutating func replayLog(_ log: ReplayLog) {
    sections.append((out.bytes.count, .replay(log.captured)))
  }

  /// The live eviction records, each as the index of its session in this snapshot:
  /// a session's records are its kept events in seq order, so the seq is implied.
  /// Written by `joined()` from the order as captured now.
  private mutating func replayBudget(_ budget: ReplayBudget) {
    out.u64(budget.evictions)
    sections.append((out.bytes.count, .evictionOrder(budget.capturedOrder)))
  }
}

extension SnapshotWriter {
  // MARK: Liveness (§5, §8)

  mutating func liveness(_ state: LivenessState) {
    out.u64(state.nextRecord)
    out.u64(state.nextIdleGeneration)
    let ids = state.records.keys.sorted()
    out.count(ids.count)
    for id in ids {
      guard let record = state.records[id] else { continue }
      lostRecord(id, record, indexed: state.recordByToken[record.token] == id)
    }
    let owners = state.lostOwner.keys.sorted { ($0.session, $0.uid) < ($1.session, $1.uid) }
    out.count(owners.count)
    for key in owners {
      out.string(key.session)
      out.string(key.uid)
      out.u64(state.lostOwner[key] ?? 0)
    }
    let idle = state.idle.keys.sorted()
    out.count(idle.count)
    for session in idle {
      guard let countdown = state.idle[session] else { continue }
      out.string(session)
      out.u64(countdown.generation)
      out.i64(countdown.endsAtMonoMs)
    }
  }

  /// `indexed`: resume finds the record by its token (a resume or a newer record
  /// takes the token's entry away).
  mutating func lostRecord(_ id: UInt64, _ record: LostRecord, indexed: Bool) {
    out.u64(id)
    out.string(record.uid)
    out.string(record.token.string)
    out.count(record.sessions.count)
    for s in record.sessions { out.string(s) }
    out.bool(indexed)
  }

  // MARK: Calls (§9)

  mutating func callBook(_ book: CallBook) {
    let ids = book.calls.keys.sorted()
    out.count(ids.count)
    for id in ids { if let c = book.calls[id] { call(c) } }
    let uids = book.live.keys.sorted()
    out.count(uids.count)
    for uid in uids {
      let list = book.live[uid, default: []]
      out.string(uid)
      out.count(list.count)
      for c in list { out.string(c.id) }
    }
    let initiators = book.initiateWindows.keys.sorted()
    out.count(initiators.count)
    for uid in initiators {
      let times = book.initiateWindows[uid, default: []]
      out.string(uid)
      out.count(times.count)
      for t in times { out.i64(t) }
    }
    let callees = book.ringWindows.keys.sorted()
    out.count(callees.count)
    for uid in callees {
      let times = book.ringWindows[uid, default: []]
      out.string(uid)
      out.count(times.count)
      for t in times { out.i64(t) }
    }
    callStats(book.stats)
    let finished = book.finished.counted
    out.u64(book.finished.evicted)
    out.count(finished.count)
    for (id, bytes) in finished {
      out.string(id)
      out.u64(UInt64(clamping: bytes))
    }
  }

  mutating func call(_ c: Call) {
    out.string(c.id)
    out.string(c.sessionId)
    out.string(c.caller.uid)
    out.string(c.caller.name)
    out.optional(c.caller.avatar) { $0.string($1) }
    out.u64(c.callerConnection.raw)
    out.count(c.to.count)
    for uid in c.to { out.string(uid) }
    out.string(c.callType.rawValue)
    out.optional(c.metadata) { $0.bytes($1) }
    out.i64(c.createdAtWallMs)
    out.i64(c.expiresAtWallMs)
    out.i64(c.ringDeadlineMonoMs)
    out.count(c.callees.count)
    for callee in c.callees { self.callee(callee) }
    out.optional(c.acceptedAtMonoMs) { $0.i64($1) }
    out.optional(c.endedBy) { $0.string($1) }
    out.optional(c.endReason) { $0.string($1.rawValue) }
    out.optional(c.endDurationMs) { $0.i64($1) }
    out.bool(c.cancelledByCaller)
    out.optional(c.finishedAtMonoMs) { $0.i64($1) }
  }

  mutating func callee(_ c: Callee) {
    out.string(c.uid)
    out.string(c.state.rawValue)
    out.count(c.devices.count)
    for d in c.devices { out.u64(d.raw) }
    out.count(c.done.count)
    for d in c.done { out.u64(d.raw) }
    out.optional(c.acceptedBy) { $0.u64($1.raw) }
    out.bool(c.wasOffline)
    out.optional(c.rejectReason) { $0.string($1.rawValue) }
    out.optional(c.cancelReason) { $0.string($1.rawValue) }
    pushTargets(c.pushed)
  }

  mutating func callStats(_ s: CallStats) {
    out.u64(s.initiated)
    counts(s.outcomes)
    counts(s.webhooks)
    out.i64(Int64(s.held))
    out.i64(Int64(s.finishedHeld))
    out.i64(Int64(s.finishedBytes))
    out.u64(s.finishedEvicted)
  }

  // MARK: Counters (§10)

  mutating func coreStats(_ s: CoreStats) {
    out.i64(Int64(s.connections))
    out.i64(Int64(s.sessions))
    out.i64(Int64(s.participants))
    counts(s.commandsByType)
    counts(s.eventsByType)
    out.u64(s.deliveries)
    counts(s.errorsByCode)
    out.u64(s.lost)
    out.u64(s.restored)
    out.u64(s.timedOut)
    out.i64(Int64(s.replayBytes))
    out.u64(s.replayEvictions)
  }

  /// A counter table by sorted name.
  mutating func counts(_ table: [String: UInt64]) {
    out.count(table.count)
    for key in table.keys.sorted() {
      out.string(key)
      out.u64(table[key, default: 0])
    }
  }

  // MARK: Deadlines

  /// The wanted deadlines of every lane in firing order, with their order numbers, and
  /// the scheduling counter: the restored queue fires the same entries in the same
  /// order, and numbers new ones as this one would.
  mutating func deadlines(_ queue: DeadlineQueue) {
    let wanted = queue.pending.filter { core.isWanted($0.kind) }.sorted { $0.fires(before: $1) }
    out.u64(queue.nextOrderNumber)
    out.count(wanted.count)
    for d in wanted { deadline(d) }
  }

  mutating func deadline(_ d: Deadline) {
    out.i64(d.atMonoMs)
    out.u64(d.order)
    switch d.kind {
    case .hello(let c):
      out.u8(0)
      out.u64(c.raw)
    case .liveness(.grace(let record)):
      out.u8(2)
      out.u64(record)
    case .liveness(.idleWarning(let generation)):
      out.u8(3)
      out.u64(generation)
    case .liveness(.idleEnd(let generation)):
      out.u8(4)
      out.u64(generation)
    case .call(.ring(let callId)):
      out.u8(5)
      out.string(callId)
    case .call(.purge(let callId)):
      out.u8(6)
      out.string(callId)
    }
  }
}

extension BinaryWriter {
  mutating func rateWindow(_ window: RateWindow) {
    let kept = window.kept
    count(kept.times.count)
    i64s(kept.times)
    u32(UInt32(clamping: kept.oldest))
  }

  /// One connection, its profile as `profile` numbers it (written by `joined()`).
  mutating func connection(_ c: ConnectionRecord, profile number: (Profile) -> UInt32) {
    u64(c.id)
    bool(c.profile != nil)
    if let p = c.profile { u32(number(p)) }
    count(c.sessions.count)
    for id in c.sessions { string(id) }
    i64(c.lastInboundMonoMs)
    u8(c.phase)
    bool(c.tokenSpent)
    bool(c.background)
    optional(c.device) { $0.string($1) }
    u32(c.badMessages)
    rateWindow(c.joinWindow)
  }

  /// A session's members in join order, each profile as `number` numbers it.
  mutating func members(_ all: [MemberRecord], profile number: (Profile) -> UInt32) {
    count(all.count)
    for m in all {
      u32(number(m.profile))
      i64(m.joinedAtWallMs)
      optional(m.connection) { $0.u64($1) }
    }
  }

  /// A session's rate windows by uid in ascending order (hash order would differ
  /// between processes).
  mutating func windows(_ all: [String: RateWindows]) {
    count(all.count)
    for (uid, w) in all.sorted(by: { $0.key < $1.key }) {
      string(uid)
      rateWindow(w.hand)
      rateWindow(w.message)
    }
  }

  /// Per user (sorted), its connections in hello order: the order calls ring them in.
  mutating func userConnections(_ users: UserConnections) {
    let groups = users.grouped()
    count(groups.count)
    for (uid, ids) in groups {
      string(uid)
      count(ids.count)
      for id in ids { u64(id) }
    }
  }

  /// One entry of the profile table (written by `SnapshotParts.joined()`).
  mutating func profile(_ p: Profile) {
    string(p.uid)
    string(p.name)
    optional(p.avatar) { $0.string($1) }
    switch p.sessions {
    case .any: u8(0)
    case .only(let ids):
      u8(1)
      count(ids.count)
      for id in ids { string(id) }
    }
    string(p.token.string)
    u8(p.role == .host ? 0 : 1)
  }
}
