public import RelayPrimitives

/// The decisions of a cluster node's life (docs/cluster.md, "Joining", "The log",
/// "Bounded history", "Redis high availability"; contract §13.1): connecting, entering
/// a generation, reading the log up to its end, joining, becoming ready, being
/// declared dead, rebuilding after lost records, the housekeeping beat and the
/// ticker's timer. Redis's replies and the clock come in as events; what to send,
/// arm or close goes out as actions. The libuv/RESP adapter (ClusterNode) only turns
/// replies into events and executes actions, as for `AppendDriver`.
///
/// Randomness (join nonces, reconnect jitter) comes from the seeded generator given
/// at init: a run is a function of its seed and its events.
public struct NodeLifecycle: Sendable {
  public enum State: Equatable, Sendable {
    case down
    case connecting
    /// Reading the log up to its end (then joining), or waiting for its own join.
    case catchingUp
    case ready
    case stopped
  }

  /// Caught up once a read returns fewer records than it asked for.
  public static let readCount = 1_000
  /// Rebuilds that met missing records again without a newer snapshot stored, before
  /// the log is given up for a new generation.
  public static let rebuildsAllowed = 2

  /// What one applied record meant for this node (the replica's `Applied`, as values).
  public struct Outcome: Equatable, Sendable {
    /// The record needs records the log no longer holds.
    public var lostRecords = false
    /// The generation was handed over to newer rules.
    public var upgrade = false
    /// Nodes the record declared dead.
    public var deaths: [UInt32] = []
    /// This node's number (if any) is still among the replica's nodes.
    public var listed = true
    /// Joins the record admitted: (nonce, number).
    public var joined: [Admitted] = []
    /// Joins it refused: (nonce, reason).
    public var refused: [Refused] = []
    /// A snapshot falls due at this position.
    public var snapshotDue: UInt64?
    /// This replica disagrees with the stored snapshot at this position.
    public var diverged: UInt64?

    public init() {}
  }

  public struct Admitted: Equatable, Sendable {
    public var nonce: UInt64
    public var number: UInt32
    public init(nonce: UInt64, number: UInt32) { (self.nonce, self.number) = (nonce, number) }
  }

  public struct Refused: Equatable, Sendable {
    public var nonce: UInt64
    public var reason: String
    public init(nonce: UInt64, reason: String) { (self.nonce, self.reason) = (nonce, reason) }
  }

  /// What the ticker's timer is to wait for: whether this node is the ticker, the
  /// replica's next deadline (the core's or a node's death check) and the log's time now.
  public struct TickerView: Equatable, Sendable {
    public var isTicker: Bool
    public var dueMs: Int64?
    public var logNowMs: Int64
    public init(isTicker: Bool, dueMs: Int64?, logNowMs: Int64) {
      (self.isTicker, self.dueMs, self.logNowMs) = (isTicker, dueMs, logNowMs)
    }
  }

  public enum Event: Equatable, Sendable {
    /// Start, or the reconnect timer fired: connect if down.
    case connect
    /// The generation was read and its rules accepted; `hasReplica`: a replica is installed.
    case enter(generation: String, hasReplica: Bool)
    /// After a reconnect into the same generation: whether the log still holds the
    /// last record applied (a failover may have lost a tail).
    case historyChecked(LogHistory)
    /// The newest snapshot was loaded (its stream id) or there is none (`"0"`).
    case snapshotLoaded(lastId: String)
    /// The stored snapshot is unreadable (or the generation's keys unusable).
    case generationUnusable
    /// A record of a read issued at `epoch` was applied (or skipped without replica).
    case applied(id: String, epoch: UInt64, Outcome)
    /// A read issued at `epoch` returned `count` records, all handled.
    case readEnded(epoch: UInt64, count: Int, TickerView)
    /// The snapshot position stored in Redis, asked for by a rebuild.
    case storedPosition(stored: UInt64, mine: UInt64, reason: String)
    /// This replica's snapshot digest disagrees with the stored one.
    case diverged(position: UInt64)
    /// A connection to Redis ended; `leaving`: a leave waits for it, no reconnect.
    case redisLost(leaving: Bool)
    /// The sentinels named a new primary (the old connections, if any, are dropped).
    case primarySwitched
    /// The housekeeping beat: the loop's time, when this node last appended, and
    /// how many socket closes wait to be logged.
    case housekeep(nowMs: UInt64, lastAppendMs: UInt64, unloggedCloses: Int)
    /// Something the ticker's deadline depends on may have moved.
    case ticker(TickerView)
    /// The ticker's timer fired.
    case tickDue
    /// The append machine failed the batch of this join (its reply was lost and the
    /// log, read again to its end, lacks it; or Redis refused it).
    case joinFailed(nonce: UInt64)
    case close
  }

  public enum Action: Equatable, Sendable {
    /// Open the connections (ask the sentinels, resolve, connect).
    case openConnections
    /// Check that the log still holds `lastId` (XRANGE).
    case verifyHistory(lastId: String)
    /// Tell the append machine (`AppendDriver`).
    case driver(AppendDriver.Event)
    /// A new generation replaced the one this node had: its state was lost.
    case resetNotice
    /// Forget the socket closes waiting to be logged (their sockets are gone).
    case dropUnloggedCloses
    /// Log the closes that waited.
    case retryUnloggedCloses
    /// Load the newest snapshot of the generation, a fresh replica at `epoch`.
    case loadSnapshot(generation: String)
    /// Send the next `XREAD` from `lastId` for `epoch`.
    case read(generation: String, epoch: UInt64, lastId: String)
    /// Log a `join` with this nonce (node 0).
    case join(nonce: UInt64)
    /// The replica's own node number.
    case setLocalNode(UInt32)
    case joined(UInt32)
    case ready(reconnected: Bool)
    /// This node was declared dead: its sockets close (1012), it joins again.
    case declaredDead
    /// Close every socket with 1012 (service restart) for this reason.
    case closeSockets(reason: String)
    case fatal(String)
    /// A snapshot falls due at this position, its record's id.
    case snapshotDue(position: UInt64, id: String)
    case divergedNotice(position: UInt64)
    /// The generation was handed over: the adapter steps down.
    case handOver
    /// Ask Redis for the stored snapshot's position, for a rebuild.
    case askStoredPosition(reason: String)
    case rebuilding(reason: String)
    /// The log is inconsistent (or unusable): bootstrap a new generation replacing `old`.
    case replaceGeneration(old: String, Replacement)
    /// Append a `beat`.
    case beat
    case armTick(afterMs: UInt64)
    case stopTick
    /// Append a `tick`.
    case tick
    /// The connections ended: close them, stop the ticker's timer, tell the host;
    /// `wasUp`: the node was reading or ready.
    case busLost(wasUp: Bool)
    case reconnect(afterMs: UInt64)
    case cancelReconnect
  }

  /// Why a generation is given up for a new one.
  public enum Replacement: Equatable, Sendable {
    /// The log lacks the last record this node applied (a failover lost a tail).
    case historyLost(lastId: String)
    case snapshotUnreadable
    /// Rebuilds keep meeting missing records.
    case inconsistent(reason: String)
  }

  public internal(set) var state = State.down
  /// This node's number in the current generation; 0 while it has none.
  public internal(set) var number: UInt32 = 0
  /// The nonce of the join this node is waiting for, if any.
  public internal(set) var pendingJoin: UInt64?
  public internal(set) var generation: String?
  public internal(set) var lastId = "0"
  /// The generation the installed replica was loaded from: a reconnect carries on
  /// only with a replica of the generation it meets (one whose snapshot load was cut
  /// short still holds the previous generation's state).
  public internal(set) var replicaGeneration: String?
  /// Bumped whenever the replica is replaced (or a read must stop): replies of reads
  /// issued for an older one are dropped.
  public internal(set) var readEpoch: UInt64 = 0
  /// Failed Redis connects since the last success.
  public internal(set) var redisAttempts = 0
  /// Consecutive rebuilds from a snapshot that met missing records again.
  public internal(set) var rebuildsWithoutProgress = 0
  /// The ticker's timer, in log time.
  var tickTimer = DeadlineTimer()
  /// The log time the ticker's timer is armed for.
  public var armedTickMs: Int64? { tickTimer.armedMs }
  /// Beats are sent this often (the housekeeping period).
  public let beatMs: UInt64
  /// Reconnect delays: full jitter, 100 ms doubling to 2 s.
  public let backoff = Backoff(baseMs: 100, capMs: 2_000)
  var random: SeededRandom

  public init(beatMs: UInt64, random: SeededRandom) {
    self.beatMs = beatMs
    self.random = random
  }

  /// Whether a read issued for generation `g` at `epoch` still counts.
  public func reading(_ g: String, _ epoch: UInt64) -> Bool {
    generation == g && reading(epoch)
  }

  func reading(_ epoch: UInt64) -> Bool {
    readEpoch == epoch && (state == .ready || state == .catchingUp)
  }

  /// Whether this node may log its own inputs now.
  public var mayAppend: Bool { (state == .ready || state == .catchingUp) && number != 0 && generation != nil }

  /// Who does what with a snapshot made at a due position: only a ready, joined
  /// ticker stores it (and so trims the log behind the previous one); the other
  /// joined nodes log its digest for comparison.
  public enum SnapshotDuty: Equatable, Sendable { case none, logDigest, store }

  public func snapshotDuty(isTicker: Bool) -> SnapshotDuty {
    guard state == .ready, number != 0 else { return .none }
    return isTicker ? .store : .logDigest
  }

  public mutating func handle(_ event: Event) -> [Action] {
    var out: [Action] = []
    switch event {
    case .connect:
      guard state == .down else { return [] }
      state = .connecting
      out.append(.openConnections)
    case .enter(let g, let hasReplica): enter(g, hasReplica: hasReplica, &out)
    case .historyChecked(let history):
      guard state == .connecting, let g = generation else { return [] }
      switch history {
      case .intact: carryOn(&out)
      case .behind: replace(g, .historyLost(lastId: lastId), &out)
      case .trimmed:
        // Carrying on would read records after a hole, or after a tail lost and
        // trimmed away: the stored snapshot is the state to go on from.
        out.append(.driver(.reconnected))
        rebuild(reason: "the log was trimmed past this node's last record", &out)
      }
    case .snapshotLoaded(let id):
      // The replica is the snapshot's now, whatever the connections did meanwhile: a
      // reconnect into this generation reads on from here.
      guard let g = generation else { return [] }
      lastId = id
      replicaGeneration = g
      out.append(.read(generation: g, epoch: readEpoch, lastId: lastId))
    case .generationUnusable:
      guard let g = generation else { return [] }
      replace(g, .snapshotUnreadable, &out)
    case .applied(let id, let epoch, let outcome):
      guard reading(epoch) else { return [] }
      lastId = id
      applied(id, outcome, &out)
    case .readEnded(let epoch, let count, let view): readEnded(epoch, count, view, &out)
    case .storedPosition(let stored, let mine, let reason): storedPosition(stored, mine, reason, &out)
    case .diverged(let position):
      out.append(.divergedNotice(position: position))
      restart(reason: "node rebuilding its state", &out)
    case .redisLost(let leaving): lost(leaving: leaving, &out)
    case .primarySwitched:
      redisAttempts = 0  // an attempt at the old address that fails retries at once
      guard state == .down else { return [] }
      state = .connecting
      out += [.cancelReconnect, .openConnections]
    case .housekeep(let now, let last, let closes):
      guard state == .ready else { return [] }
      if closes > 0 {
        out.append(.retryUnloggedCloses)  // an append: the node is not idle
      } else if now >= last + beatMs / 2 {
        out.append(.beat)
      }
    case .ticker(let view): armTicker(view, &out)
    case .tickDue:
      tickTimer.fired()
      out.append(.tick)
    case .joinFailed(let nonce):
      // Not in the log: the next read that reaches its end joins again (a join that
      // still took effect leaves a number without beats, declared dead in time).
      if pendingJoin == nonce { pendingJoin = nil }
    case .close:
      state = .stopped
      _ = tickTimer.disarm()
    }
    return out
  }
}
