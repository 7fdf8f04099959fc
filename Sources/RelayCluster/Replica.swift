// One node's replica of the cluster's relay (docs/cluster.md). Every node applies
// the same log, record by record, to its own `RelayCore`; the core is deterministic
// (DESIGN.md), so every replica holds the same sessions, hands, calls, `seq` and
// resume tokens. A node executes only the effects that concern it: writes to its own
// sockets (the shell's connection table filters those) and, for webhooks, those of
// the records it logged itself, so each webhook is POSTed once by the cluster.
//
// The replica is also the cluster's membership and its clock, as replicated state:
// - Node numbers are assigned when a `join` is applied, from a counter in this state,
//   so they are never reused within a generation whatever Redis loses or evicts.
// - Time is Redis's (`t` of each record), made monotonic along the log by adding only
//   forward steps: no node's wall clock moves a timer, and one record stamped far in
//   the future moves the clock once, not for good.
// - Every record of a node counts as its beat; a node whose last record is older than
//   `nodeTimeoutMs` on the log's clock is dead at the same record on every replica.
//   A silence of the whole log (Redis unreachable for everyone) is nobody's death.
// - Records are untrusted input: one that is malformed, out of range, out of place,
//   or from a node that is not live is rejected, the same way on every replica, and
//   never traps (protocol/PROTOCOL.md §13.1).
public import RelayCore
import RelayProtocol
import RelayPrimitives

/// Ids for the replicated core: the same on every replica, unguessable outside the
/// cluster. Draw n is `HMAC-SHA256(seed, n)`, URL-safe base64; the seed is the log
/// generation's secret, shared through Redis. `counter` is part of the snapshot.
public final class LogIdentifiers: IdentifierSource {
  private let seed: [UInt8]
  private let hmac: ([UInt8], [UInt8]) -> [UInt8]
  public internal(set) var counter: UInt64 = 0

  public init(seed: [UInt8], hmac: @escaping (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]) {
    self.seed = seed
    self.hmac = hmac
  }

  public func token(byteCount: Int) -> String {
    var out: [UInt8] = []
    var block: UInt32 = 0
    while out.count < byteCount {
      counter &+= 1
      var message: [UInt8] = []
      withUnsafeBytes(of: counter.littleEndian) { message.append(contentsOf: $0) }
      withUnsafeBytes(of: block.littleEndian) { message.append(contentsOf: $0) }
      out.append(contentsOf: hmac(seed, message))
      block &+= 1
    }
    return Base64URL.encode(Array(out.prefix(byteCount)))
  }
}

/// The outcome of an `AdminAction`, for the HTTP answer.
public enum AdminResult: Equatable {
  case sessionCreated(String)
  case participantRemoved(Bool)
  case call(CallHTTPResult)
  /// `GET /v1/sessions/{id}` body; nil → 404.
  case sessionInfo([UInt8]?)
  /// `GET /v1/calls/{id}` body; nil → 404.
  case callInfo([UInt8]?)
  /// `PUT|DELETE /v1/push/devices/{device}`: 204, or 400 with an error body.
  case pushDevice(CallHTTPResult)
  /// A provider's token removal was applied (false: no such registration).
  case pushTokenRemoved(Bool)
  /// The bearer token was not valid at the record's instant.
  case unauthorized
}

/// A node as every replica sees it.
public struct NodeRecord: Equatable, Sendable {
  public var name: String
  public var lastSeenMs: Int64
}

/// Settings every node of a generation shares (they are in the shared-flags digest).
public struct ReplicaConfig: Sendable {
  public var nodeTimeoutMs: Int64
  /// A snapshot is due after this many records, or `snapshotBytes` of records.
  public var snapshotRecords: UInt64 = 50_000
  public var snapshotBytes: UInt64 = 32 << 20
  public var limits: LogLimits

  public init(nodeTimeoutMs: Int64, limits: LogLimits) {
    self.nodeTimeoutMs = nodeTimeoutMs
    self.limits = limits
  }
}

public final class Replica {
  public let core: RelayCore
  public let ids: LogIdentifiers
  public let config: ReplicaConfig
  /// This replica's own node number (0 before it has joined). Local, not replicated.
  public var localNode: UInt32 = 0
  /// This replica's digests of its own snapshots, by position (local, the last few).
  var localDigests: [(position: UInt64, digest: [UInt8])] = []
  /// Stored digests applied before this replica's own digest of their position was
  /// ready (the shell digests off its loop): compared when it arrives (the last few).
  var storedDigests: [(position: UInt64, digest: [UInt8])] = []

  // Replicated state (in every snapshot). `@exclusivity(unchecked)` on what every
  // record reads and writes: a replica is used by one thread and none of these is
  // accessed while another access to it is open, and the runtime's dynamic
  // exclusivity bookkeeping cost more per record than the updates themselves.
  /// Position of the last record applied (the append script counts from 1).
  @exclusivity(unchecked) public internal(set) var position: UInt64 = 0
  /// The log's clock, monotonic; `lastRawMs` is the last record's own `t`.
  @exclusivity(unchecked) public internal(set) var clockMs: Int64 = 0
  @exclusivity(unchecked) public internal(set) var lastRawMs: Int64 = 0
  /// Live nodes by number; numbers below `nextNumber` not in it are gone for good.
  @exclusivity(unchecked) public internal(set) var nodes: [UInt32: NodeRecord] = [:]
  var nextNumber: UInt32 = 1
  /// What every node of the generation shares; set by the first join.
  public internal(set) var rules: ClusterRules?
  /// Open connections per node, to end them when their node dies.
  var connectionsByNode: [UInt32: Set<UInt64>] = [:]
  @exclusivity(unchecked) var recordsSinceSnapshot: UInt64 = 0
  @exclusivity(unchecked) var bytesSinceSnapshot: UInt64 = 0
  /// A record that continued past a hole in positions; a second one right after it
  /// proves the hole is real (a single crafted record cannot).
  @exclusivity(unchecked) var pendingGap: UInt64?
  /// The generation was handed over (rolling upgrade): it accepts nothing more.
  @exclusivity(unchecked) public internal(set) var sealed = false

  /// Node numbers fit the top 24 bits of a connection id.
  static let maxNodeNumber: UInt32 = (1 << 24) - 1
  /// Record times beyond this (year 6429) are refused: no sum of a time and a
  /// duration of the config can then overflow.
  static let maxTimeMs: Int64 = 1 << 47

  public init(core: RelayCore, ids: LogIdentifiers, config: ReplicaConfig) {
    self.core = core
    self.ids = ids
    self.config = config
    // A replica is snapshotted at intervals from its first record: its core keeps
    // its snapshot records from the start, so no capture ever builds them all.
    core.keepSnapshotRecords()
  }

  /// The node whose turn it is to log `tick`s for the core's deadlines and to store
  /// snapshots: the live node with the lowest number. Every replica agrees on it.
  public var ticker: UInt32? { nodes.keys.min() }

  /// When the next death may be declared, if no record comes from that node first.
  public var nextDeathCheckMs: Int64? {
    nodes.values.map { $0.lastSeenMs + config.nodeTimeoutMs + 1 }.min()
  }

  /// Connection ids of a node, as the shell numbers them: node in the top 24 bits.
  public static func connectionID(node: UInt32, local: UInt64) -> ConnectionID {
    ConnectionID(UInt64(node) << 40 | (local & (1 << 40 - 1)))
  }

  public static func node(of c: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: c >> 40) }

  /// Applies one record of the log.
  public func apply(_ raw: RawRecord) -> Applied {
    let position = Decimal.parse(raw.position)
    let timeMs = Decimal.parse(raw.timeMs).flatMap { Int64(exactly: $0) }
    guard let batch = raw.batch else {
      return apply(position: position, timeMs: timeMs, byteCount: 0) { nil }
    }
    return batch.withUnsafeBytes { apply(position: position, timeMs: timeMs, batch: $0) }
  }

  /// Applies a record whose fields are already numbers (a data file's frame,
  /// DataFile.swift): the same as `apply(_:)` of its decimal form.
  public func apply(batch bytes: ArraySlice<UInt8>, position: UInt64, timeMs: Int64) -> Applied {
    bytes.withUnsafeBytes { apply(batch: $0, position: position, timeMs: timeMs) }
  }

  /// `apply(batch:position:timeMs:)` of bytes where they lie: a restart's file, or the
  /// frame the durable node has just written to its turn buffer (DiskLog.swift), so
  /// its own records take the very path of their replay.
  public func apply(batch bytes: UnsafeRawBufferPointer, position: UInt64, timeMs: Int64) -> Applied {
    apply(position: position, timeMs: timeMs, batch: bytes)
  }

  private func apply(position n: UInt64?, timeMs t: Int64?, batch bytes: UnsafeRawBufferPointer) -> Applied {
    let limits = config.limits
    return apply(position: n, timeMs: t, byteCount: bytes.count) {
      if let one = LogBatch.singleText(bytes, limits: limits) { return .text(one.node, one.connection, one.text) }
      return LogBatch(decoding: Array(bytes), limits: limits).map { .batch($0) }
    }
  }

  /// A decoded batch: one text message left where it lies (LogBatch.singleText), or
  /// any batch.
  private enum Decoded {
    case text(UInt32, UInt64, UnsafeRawBufferPointer)
    case batch(LogBatch)

    var node: UInt32 {
      switch self {
      case .text(let node, _, _): return node
      case .batch(let b): return b.node
      }
    }
  }

  /// Every form of a record ends here: its position, its time (nil: missing or not a
  /// number), the batch's encoded length, and the batch, decoded only once the
  /// position and time are accepted (nil: malformed).
  private func apply(position n: UInt64?, timeMs t: Int64?, byteCount: Int, batch: () -> Decoded?) -> Applied {
    let before = (position: position, clockMs: clockMs)
    defer {
      if let broken = Self.violation(before: before, after: (position, clockMs)) { fatalError(broken) }
    }
    var applied = Applied()
    guard let advanced = takePosition(n, &applied) else { return applied }
    accept(t, batch, &applied)
    if advanced { countTowardsSnapshot(byteCount, &applied) }
    return applied
  }

  /// The invariants of one `apply`, by name: nil when a record took the replica from
  /// `before` to `after`. Every replica must pass through the same positions and
  /// clock readings (docs/cluster.md); a record that skipped a position or moved the
  /// clock back would make replicas diverge, whatever the log held, so a failure is
  /// a bug here (hostile records are refused before they reach the state).
  static func violation(
    before: (position: UInt64, clockMs: Int64), after: (position: UInt64, clockMs: Int64)
  ) -> String? {
    if after.position != before.position && after.position != before.position &+ 1 {
      return "replica apply: the position advances by at most one (from \(before.position) to \(after.position))"
    }
    if after.clockMs < before.clockMs {
      return "replica apply: the log clock is monotonic (from \(before.clockMs) to \(after.clockMs) ms)"
    }
    return nil
  }

  /// Takes the record's position if it is the next one (true), or accepts a second
  /// record at the current position (false): positions come from the append script,
  /// but a record XADDed by hand can carry any, and one that took a position first
  /// must not silence the legitimate record counted there. Nil: not applied.
  /// A legitimate record of a dead node still takes its place.
  private func takePosition(_ n: UInt64?, _ applied: inout Applied) -> Bool? {
    guard let n, n >= position, n > 0 else {
      applied.rejected = "no position, or one before the last applied"
      return nil
    }
    if n == position { return false }
    guard n == position + 1 else {
      if let gap = pendingGap, n == gap + 1 {
        applied.lostRecords = true
        applied.rejected = "records \(position + 1)...\(gap - 1) are missing from the log"
      } else {
        applied.rejected = "position \(n) skips records after \(position)"
      }
      pendingGap = n
      return nil
    }
    pendingGap = nil
    position = n
    return true
  }

  private func accept(_ t: Int64?, _ decode: () -> Decoded?, _ applied: inout Applied) {
    guard let t, t > 0, t < Self.maxTimeMs else {
      applied.rejected = "time missing or out of range"
      return
    }
    guard let batch = decode() else {
      applied.rejected = "malformed batch"
      return
    }
    let node = batch.node
    if let reason = refusal(of: batch) {
      applied.rejected = reason
      return
    }
    let at = advanceClock(to: t)
    applied.deaths = declareDeaths(at: at)
    core.tick(at: at)
    if node != 0 {
      guard let live = nodes.index(forKey: node) else {
        // Found dead at this very record: what it logged after its silence is fenced.
        applied.rejected = "node \(node) is not live"
        applied.effects = core.takeEffects()
        return
      }
      // Most records share their millisecond with the one before: a read, not a write
      // through the table, when the beat is already counted.
      if nodes.values[live].lastSeenMs != clockMs { nodes.values[live].lastSeenMs = clockMs }
    }
    applied.ours = localNode != 0 && node == localNode
    switch batch {
    case .text(_, let c, let text):
      receive(c, text, node: node, at: at)
    case .batch(let batch):
      for input in batch.inputs {
        self.input(input, node: node, at: at, &applied)
        if sealed { break }
      }
    }
    applied.effects = core.takeEffects()
  }

  /// Why a well-formed batch is not applied, if it is not.
  private func refusal(of batch: Decoded) -> String? {
    if sealed { return "the generation was handed over" }
    switch batch {
    case .batch(let batch) where batch.node == 0:
      let control = batch.inputs.allSatisfy {
        switch $0 {
        case .join, .upgrade: return true
        default: return false
        }
      }
      return control ? nil : "node 0 may only join or hand over"
    case .text(0, _, _): return "node 0 may only join or hand over"
    default: return nodes[batch.node] == nil ? "node \(batch.node) is not live" : nil
    }
  }

  private func countTowardsSnapshot(_ byteCount: Int, _ applied: inout Applied) {
    recordsSinceSnapshot += 1
    bytesSinceSnapshot &+= UInt64(byteCount)
    if applied.upgrade != nil || recordsSinceSnapshot >= config.snapshotRecords
      || bytesSinceSnapshot >= config.snapshotBytes
    {
      applied.snapshotDue = position
      recordsSinceSnapshot = 0
      bytesSinceSnapshot = 0
    }
  }

  /// Only forward steps of Redis's clock move the log's clock. A step longer than half
  /// the node timeout means nobody could write: nobody's silence counts.
  private func advanceClock(to t: Int64) -> Instant {
    if lastRawMs == 0 {
      clockMs = t
    } else if t > lastRawMs {
      let step = t - lastRawMs
      clockMs += step
      if step > config.nodeTimeoutMs / 2 {
        for n in nodes.keys { nodes[n]?.lastSeenMs = clockMs }
      }
    }
    lastRawMs = t
    return Instant(monoMs: clockMs, wallMs: clockMs)
  }

  private func input(_ input: LogInput, node: UInt32, at: Instant, _ applied: inout Applied) {
    switch input {
    case .join(let request): join(request, at: at, &applied)
    case .beat, .tick: break
    case .leave: retire(node, at: at)
    case .open(let c):
      // A repeated `open` (an append retried after a lost reply) is ignored.
      guard Self.node(of: c) == node, connectionsByNode[node, default: []].insert(c).inserted else { return }
      core.open(ConnectionID(c), at: at)
    case .text(let c, let bytes):
      bytes.withUnsafeBytes { receive(c, $0, node: node, at: at) }
    case .closed(let c, let clean):
      guard Self.node(of: c) == node, connectionsByNode[node]?.remove(c) != nil else { return }
      core.closed(ConnectionID(c), clean: clean, at: at)
    case .admin(let request, let action):
      applied.admin.append((request, Self.run(action, on: core, at: at)))
    case .digest(let p, let digest, let stored):
      guard stored else { return }
      guard let mine = localDigests.last(where: { $0.position == p }) else {
        storedDigests.append((p, digest))
        if storedDigests.count > 4 { storedDigests.removeFirst() }
        return
      }
      if mine.digest != digest { applied.diverged = p }
    case .upgrade(let rules):
      guard let current = self.rules, rules > current.rules else { return }
      applied.upgrade = (rules, ticker)
      for n in nodes.keys.sorted() { retire(n, at: at) }
      sealed = true
    }
  }

  /// A socket's message, applied where it lies (the core only reads it).
  private func receive(_ c: UInt64, _ text: UnsafeRawBufferPointer, node: UInt32, at: Instant) {
    guard Self.node(of: c) == node else { return }
    core.receive(ConnectionID(c), text: text, at: at)
  }

  private func join(_ request: JoinRequest, at: Instant, _ applied: inout Applied) {
    if let rules, rules != request.rules {
      let reason: String
      if rules.format != request.rules.format {
        reason = "log format \(request.rules.format) differs from the generation's \(rules.format)"
      } else if rules.configDigest != request.rules.configDigest {
        reason = "shared flags differ from the generation's (--grace, --ring-timeout, limits, secret …)"
      } else {
        reason = "rules version \(request.rules.rules) differs from the generation's \(rules.rules)"
      }
      applied.refusedJoins.append((request.nonce, reason))
      return
    }
    guard nextNumber <= Self.maxNodeNumber, !request.name.isEmpty else {
      applied.refusedJoins.append((request.nonce, "no node number left, or an empty name"))
      return
    }
    rules = request.rules
    let number = nextNumber
    nextNumber += 1
    nodes[number] = NodeRecord(name: request.name, lastSeenMs: at.monoMs)
    applied.joined.append((request.nonce, number))
  }

  /// Runs an admin action on a core: standalone directly, clustered inside `apply`.
  public static func run(_ action: AdminAction, on core: RelayCore, at: Instant) -> AdminResult {
    switch action {
    case .createSession:
      return .sessionCreated(core.createSession(at: at))
    case .removeParticipant(let session, let uid):
      return .participantRemoved(core.removeParticipant(session: session, uid: uid, at: at))
    case .call(let action, let callId, let token):
      guard let identity = core.verifyUserToken(token, at: at) else { return .unauthorized }
      return .call(core.callAction(action, callId: callId, identity: identity, at: at))
    case .sessionInfo(let session):
      return .sessionInfo(core.sessionInfo(session))
    case .callInfo(let callId, let token):
      guard let identity = core.verifyUserToken(token, at: at) else { return .unauthorized }
      return .callInfo(core.callInfo(callId: callId, uid: identity.uid))
    case .pushDevice(let action, let device, let token):
      guard let identity = core.verifyUserToken(token, at: at) else { return .unauthorized }
      return .pushDevice(core.pushDeviceAction(action, device: device, identity: identity, at: at))
    case .removePushToken(let uid, let token):
      return .pushTokenRemoved(core.removePushToken(uid: uid, token: token, at: at))
    }
  }

  private func declareDeaths(at: Instant) -> [UInt32] {
    // Checked at every record: no table is built while nobody is dead.
    var dead: [UInt32] = []
    for (n, node) in nodes where at.monoMs - node.lastSeenMs > config.nodeTimeoutMs { dead.append(n) }
    guard !dead.isEmpty else { return dead }
    dead.sort()
    for n in dead { retire(n, at: at) }
    return dead
  }

  /// A node is gone: its connections end as lost (§5; grace then runs as for any
  /// lost connection), in id order so every replica emits the same events.
  private func retire(_ n: UInt32, at: Instant) {
    nodes[n] = nil
    for c in (connectionsByNode.removeValue(forKey: n) ?? []).sorted() {
      core.closed(ConnectionID(c), clean: false, at: at)
    }
  }

  /// Records this replica's own digest of its snapshot at `position`, to compare with
  /// the stored one when its `digest` record is applied. True when that record was
  /// applied already and disagrees: this replica diverged at `position`.
  @discardableResult
  public func noteLocalDigest(_ digest: [UInt8], at position: UInt64) -> Bool {
    localDigests.append((position, digest))
    if localDigests.count > 4 { localDigests.removeFirst() }
    guard let stored = storedDigests.last(where: { $0.position == position }) else { return false }
    storedDigests.removeAll { $0.position <= position }
    return stored.digest != digest
  }
}
