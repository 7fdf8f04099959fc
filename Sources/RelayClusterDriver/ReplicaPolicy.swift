// How many Redis replicas must hold a record before it counts (docs/cluster.md,
// "Redis high availability"; contract §13.2), and what a reader does with a `WAIT`'s
// answer. Redis replication is asynchronous: a record on the primary only may vanish
// in a failover, so both the appender and every reader wait for the replicas.

/// `--redis-min-replicas` with the one relaxation (a failover this node followed).
public struct ReplicaPolicy: Equatable, Sendable {
  /// `--redis-min-replicas`.
  public var minReplicas: Int
  /// Whether anything here promotes a replica (Sentinel): without it, always N.
  public var followsFailovers: Bool
  /// The primary in use, as `host:port`.
  public var primary: String?
  public private(set) var seen = ReplicasSeen()

  public init(minReplicas: Int, followsFailovers: Bool) {
    self.minReplicas = minReplicas
    self.followsFailovers = followsFailovers
  }

  /// How many replicas must hold a record: `--redis-min-replicas`, from the first
  /// append (also before a replica's first sync: the node answers `unavailable`
  /// until one holds the records). The one relaxation: after a failover this node
  /// followed, a promoted primary that has not had N replicas in sync is held to
  /// the most it has had — it lost its old primary, and holding it to N would stop
  /// every write until an operator brings one back. A primary that loses replicas
  /// it had is still held to them (`unavailable` until they are back).
  /// docs/cluster.md, "Redis high availability", says what this costs.
  public var required: Int {
    followsFailovers ? seen.required(minReplicas, on: primary) : minReplicas
  }

  /// `ROLE` on connecting, or a `WAIT`'s answer: `n` replicas in sync with the primary.
  public mutating func note(_ n: Int64) { seen.note(n, on: primary) }

  /// A reader's `WAIT` after the `PUBLISH` that follows each `XREAD` batch.
  public enum ReadWait: Equatable, Sendable {
    /// N replicas hold the batch: apply it.
    case apply
    /// Fewer do: wait again (the node reads as failing meanwhile).
    case waitAgain(held: Int64)
    /// Redis refused: drop the connections and read again afresh.
    case drop(String?)
    /// The connection ended: the reconnect reads again from the last applied record.
    case ended
  }

  /// What a reader does with `WAIT`'s answer (`nil`: the connection ended). A refused
  /// probe proves nothing about the records: they are read again afresh.
  public mutating func readWait(_ answer: WaitAnswer?, probed: Bool) -> ReadWait {
    guard let answer else { return .ended }
    guard probed else { return .drop(nil) }
    switch answer {
    case .count(let n):
      note(n)
      return n >= Int64(required) ? .apply : .waitAgain(held: n)
    case .error(let message):
      return .drop(message)
    }
  }
}

/// `WAIT`'s answer: how many replicas acknowledged, or Redis's error.
public enum WaitAnswer: Equatable, Sendable {
  case count(Int64)
  case error(String)
}

/// The most replicas one primary has been seen with (`ROLE` on connecting, then each
/// `WAIT`'s count); another primary starts again from none. Whether this node has
/// followed a failover: the first primary it uses is never relaxed, so a node
/// started before its replica's first sync is held to N from its first append.
public struct ReplicasSeen: Equatable, Sendable {
  public private(set) var primary: String?
  public private(set) var count = 0
  /// This node moved from one primary to another (a failover it followed).
  public private(set) var followedFailover = false

  public init() {}

  public mutating func note(_ replicas: Int64, on address: String?) {
    if address != primary {
      if primary != nil, address != nil { followedFailover = true }
      primary = address
      count = 0
    }
    count = max(count, Int(clamping: replicas))
  }

  public func most(on address: String?) -> Int { address == primary ? count : 0 }

  /// The replicas a record needs on `address` when `wanted` are asked for.
  public func required(_ wanted: Int, on address: String?) -> Int {
    followedFailover ? min(wanted, most(on: address)) : wanted
  }
}

/// Whether a log still holds what a node applied from it (docs/cluster.md, "Redis
/// high availability"). Stream ids only grow along a log, and a failover may lose
/// the log's tail, never its middle; trimming removes its head.
public enum LogHistory: Equatable, Sendable {
  case intact
  case behind
  /// Trimmed past the last record applied: behind a snapshot, or a lost tail trimmed
  /// away since (the two look alike): the node rebuilds from the stored snapshot.
  case trimmed

  /// `found`: the id of the entry at `lastApplied` if the log has it; `first`: the id
  /// of the log's first entry. Missing, with the log starting before it: the tail the
  /// node applied is gone. Missing because the log starts after it: trimmed.
  public static func check(lastApplied: String, found: String?, first: String?) -> LogHistory {
    if found == lastApplied { return .intact }
    guard let first, let firstKey = streamKey(first), let mineKey = streamKey(lastApplied) else { return .behind }
    return firstKey > mineKey ? .trimmed : .behind
  }

  /// `ms-seq` as a pair that compares as Redis orders stream ids; nil if malformed.
  public static func streamKey(_ id: String) -> StreamKey? {
    let parts = id.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
    return StreamKey(ms: ms, seq: seq)
  }

  public struct StreamKey: Comparable, Sendable {
    public var ms: UInt64
    public var seq: UInt64
    public static func < (a: StreamKey, b: StreamKey) -> Bool { (a.ms, a.seq) < (b.ms, b.seq) }
  }
}
