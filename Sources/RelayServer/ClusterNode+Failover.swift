import EventLoop
import Logging
import RelayCluster

// Redis high availability (docs/cluster.md, "Redis high availability"; contract
// §13.2). Redis replication is asynchronous: a record on the primary only may vanish
// in a failover. So a record counts only once `--redis-min-replicas` replicas hold
// it, on both sides of the log:
// - the appender sends `WAIT N deadline` after its append; short of N, its callers
//   get `unavailable` (the record may still count later, for everyone);
// - every reader, after each `XREAD` batch, publishes one message on its own
//   connection (a write that moves its replication offset past the batch) and waits
//   for N replicas too; it applies the batch only then, so no node answers or acts
//   on a record a promoted replica could lack.
// After a reconnect into the same generation the node checks that the log still holds
// the last record it applied; if not, it starts a new generation rather than run on
// a forked history.
extension ClusterNode {
  /// How long an append (and each wait of a reader) waits for the replicas: the
  /// append deadline. Equal to `stallMs`, past which the node reads as not ready.
  static let replicationWaitMs: UInt64 = 1_000
  /// The channel of the readers' probes (no subscriber needs it: the publish is the write).
  static let probeChannel = Array("relay:{relay}:replicated".utf8)

  // MARK: Sentinel

  func startSentinels() {
    guard let address = config.sentinel else { return }
    let client = SentinelClient(loop: server.loop, address: address, tls: config.tls, logger: logger)
    client.onSwitch = { [weak self] primary in self?.switched(to: primary) }
    client.startWatching()
    sentinels = client
  }

  /// The sentinels' answer to "which is the primary?" for one connection attempt.
  func located(_ found: RedisAddress?) {
    guard state == .connecting else { return }
    guard let found else {
      let (log, held) = appendErrorLog.admit(nowMs: server.loop.nowMs)
      if log { logger.error("no sentinel names the Redis primary", metadata: ["held": "\(held)"]) }
      return lostRedis()
    }
    resolve(found)
  }

  /// `+switch-master`: leave the old primary now (it is dead, or about to be demoted
  /// and to refuse writes) and connect to the new one without waiting for a backoff.
  func switched(to new: RedisAddress) {
    guard state != .stopped, onLeft == nil else { return }
    if state != .down, state != .connecting {
      guard primary?.host != new.host || primary?.port != new.port else { return }
      dropConnections()
    }
    // An attempt under way (likely at the old address) that fails retries at once.
    redisAttempts = 0
    guard state == .down else { return }
    reconnectTimer?.stop()
    connect()
  }

  /// The address a sentinel named may be stale (a demoted primary still listed, a
  /// failover under way): write only to a Redis that says it is the primary.
  func checkRole() {
    guard config.sentinel != nil else { return checkPolicy() }
    commands?.send([Array("ROLE".utf8)]) { [weak self] reply in
      guard let self, let reply else { return }
      guard case .array(let items?) = reply, items.first?.string == "master" else {
        let (log, held) = self.appendErrorLog.admit(nowMs: self.server.loop.nowMs)
        if log {
          self.logger.warning(
            "the Redis the sentinels named is not a primary: asking again", metadata: ["held": "\(held)"])
        }
        return self.dropConnections()
      }
      // ["master", offset, [[ip, port, offset], …]]: the replicas in sync now.
      if items.count > 2, case .array(let replicas?) = items[2] {
        self.replicasSeen.note(Int64(replicas.count), on: self.primary)
      }
      self.checkPolicy()
    }
  }

  /// A primary demoted under a connection answers writes with `READONLY` (and `WAIT`
  /// with "cannot be used with replica instances"): ask the sentinels again.
  func noteRedisError(_ message: String) {
    guard sentinels != nil, message.hasPrefix("READONLY") || message.contains("replica instance") else { return }
    dropConnections()
  }

  /// Why a connection to Redis could not be made (refused, TLS, a wrong ACL user or
  /// password): logged like a failing append, at most every few seconds.
  func connectFailed(_ reason: String) {
    let (log, held) = appendErrorLog.admit(nowMs: server.loop.nowMs)
    if log { logger.error("cannot use the Redis connection", metadata: ["reason": "\(reason)", "held": "\(held)"]) }
  }

  // MARK: History after a failover

  /// Runs `carryOn` when the log of generation `g` still holds the last record this
  /// node applied (or lost it only to trimming behind a snapshot, which the reader
  /// handles); otherwise this Redis lost records the node acted upon: a new generation.
  func verifyHistory(_ g: String, then carryOn: @escaping () -> Void) {
    let mine = lastId
    guard mine != "0", let commands else { return carryOn() }
    let log = Self.key("log", g)
    var found: String?
    commands.send([Array("XRANGE".utf8), log, Array(mine.utf8), Array(mine.utf8)]) { reply in
      found = Self.firstId(reply)
    }
    commands.send([Array("XRANGE".utf8), log, Array("-".utf8), Array("+".utf8), Array("COUNT".utf8), Array("1".utf8)]) {
      [weak self] reply in
      guard let self, let reply, self.generation == g, self.state == .connecting else { return }
      switch LogHistory.check(lastApplied: mine, found: found, first: Self.firstId(reply)) {
      case .intact:
        carryOn()
      case .behind:
        self.logger.error(
          "the log in Redis lacks records this node applied (a failover lost them): starting a new generation",
          metadata: ["node": "\(self.config.nodeId)", "lastApplied": "\(mine)"])
        self.stats.resets += 1
        self.replaceGeneration(g)
      }
    }
  }

  /// The id of the first entry of an `XRANGE` reply.
  private static func firstId(_ reply: RESPValue?) -> String? {
    guard case .array(let items?)? = reply, let first = items.first, case .array(let parts?) = first,
      let id = parts.first?.string
    else { return nil }
    return id
  }

  // MARK: Waiting for the replicas

  /// Runs `then` once `--redis-min-replicas` replicas hold everything this `XREAD`
  /// reply returned (at once when none is required or the read timed out empty).
  /// Waits again while they do not; `reading` says whether the read still counts.
  func whenReplicated(_ reply: RESPValue, reading: @escaping () -> Bool, _ then: @escaping () -> Void) {
    guard config.minReplicas > 0, case .array(let streams?) = reply, !streams.isEmpty, let reader else {
      return then()
    }
    // Nothing read moves this connection's replication offset: the publish does, to
    // past the records just read (the replication stream is ordered).
    var probed = false
    reader.send([Array("PUBLISH".utf8), Self.probeChannel, Array(config.nodeId.utf8)]) { reply in
      if case .integer? = reply { probed = true }
    }
    awaitReplicas(on: reader, reading: reading, probed: { probed }, then)
  }

  private func awaitReplicas(
    on connection: RedisConnection, reading: @escaping () -> Bool, probed: @escaping () -> Bool,
    _ then: @escaping () -> Void
  ) {
    waitForReplicas(on: connection) { [weak self] reply in
      guard let self, reading() else { return }
      // A refused probe proves nothing about the records: read them again afresh.
      guard probed() || reply == nil else { return self.dropConnections() }
      if case .integer(let n)? = reply { self.replicasSeen.note(n, on: self.primary) }
      switch reply {
      case .integer(let n)? where n >= Int64(self.replicasRequired):
        then()
      case .integer(let n)?:
        self.replicasShort(n)
        self.awaitReplicas(on: connection, reading: reading, probed: probed, then)
      case .error(let message)?:
        self.appendFailed(message)
        self.dropConnections()
      default:
        return  // the connection ended: the reconnect reads again from the last applied record
      }
    }
  }

  /// How many replicas must hold a record: `--redis-min-replicas`, from the first
  /// append (also before a replica's first sync: the node answers `unavailable`
  /// until one holds the records). The one relaxation: after a failover this node
  /// followed, a promoted primary that has not had N replicas in sync is held to
  /// the most it has had — it lost its old primary, and holding it to N would stop
  /// every write until an operator brings one back. A primary that loses replicas
  /// it had is still held to them (`unavailable` until they are back).
  /// docs/cluster.md, "Redis high availability", says what this costs.
  /// Without Sentinel nothing promotes a replica: always N.
  var replicasRequired: Int {
    config.sentinel == nil ? config.minReplicas : replicasSeen.required(config.minReplicas, on: primary)
  }

  /// `WAIT N deadline` on `connection`: how many replicas hold its writes so far.
  func waitForReplicas(on connection: RedisConnection, _ reply: @escaping (RESPValue?) -> Void) {
    let args = ["WAIT", String(replicasRequired), String(Self.replicationWaitMs)].map { Array($0.utf8) }
    connection.send(args, limitMs: Self.replicationWaitMs + 2_000, reply)
  }

  /// The script's reply to an append, once the replicas confirmed it (or an error
  /// naming how many did, which fails the append's callers with `unavailable`).
  func confirmAppend(_ reply: RESPValue?, _ done: @escaping (RESPValue?) -> Void) {
    guard config.minReplicas > 0, let commands else { return done(reply) }
    switch reply {
    case .bulk?, .simple?: break
    default: return done(reply)
    }
    waitForReplicas(on: commands) { [weak self] answer in
      guard let self else { return }
      if case .integer(let n)? = answer { self.replicasSeen.note(n, on: self.primary) }
      switch answer {
      case .integer(let n)? where n >= Int64(self.replicasRequired): done(reply)
      case .integer(let n)?:
        let wanted = self.replicasRequired
        done(.error("NOREPLICAS \(n) of \(wanted) replicas confirmed within \(Self.replicationWaitMs) ms"))
      case .error?: done(answer)
      default: done(nil)
      }
    }
  }

  /// Readers wait while the replicas lag or are gone: logged like a failing append.
  private func replicasShort(_ n: Int64) {
    appendFailed("NOREPLICAS \(n) of \(replicasRequired) replicas hold the records read")
  }
}

/// The most replicas one primary has been seen with (`ROLE` on connecting, then each
/// `WAIT`'s count); another primary starts again from none. Whether this node has
/// followed a failover: the first primary it uses is never relaxed, so a node
/// started before its replica's first sync is held to N from its first append.
struct ReplicasSeen: Equatable {
  private(set) var primary: RedisAddress?
  private(set) var count = 0
  /// This node moved from one primary to another (a failover it followed).
  private(set) var followedFailover = false

  mutating func note(_ replicas: Int64, on address: RedisAddress?) {
    if address != primary {
      if primary != nil, address != nil { followedFailover = true }
      primary = address
      count = 0
    }
    count = max(count, Int(clamping: replicas))
  }

  func most(on address: RedisAddress?) -> Int { address == primary ? count : 0 }

  /// The replicas a record needs on `address` when `wanted` are asked for.
  func required(_ wanted: Int, on address: RedisAddress?) -> Int {
    followedFailover ? min(wanted, most(on: address)) : wanted
  }
}

/// Whether a log still holds what a node applied from it (docs/cluster.md, "Redis
/// high availability"). Stream ids only grow along a log, and a failover may lose
/// the log's tail, never its middle; trimming removes its head.
enum LogHistory: Equatable {
  case intact
  case behind

  /// `found`: the id of the entry at `lastApplied` if the log has it; `first`: the id
  /// of the log's first entry. Missing, with the log starting before it: the tail the
  /// node applied is gone. Missing because the log starts after it: trimmed behind a
  /// snapshot, which the reader handles (it rebuilds from the snapshot).
  static func check(lastApplied: String, found: String?, first: String?) -> LogHistory {
    if found == lastApplied { return .intact }
    guard let first, let firstKey = streamKey(first), let mineKey = streamKey(lastApplied) else { return .behind }
    return firstKey > mineKey ? .intact : .behind
  }

  /// `ms-seq` as a pair that compares as Redis orders stream ids; nil if malformed.
  static func streamKey(_ id: String) -> StreamKey? {
    let parts = id.split(separator: "-", omittingEmptySubsequences: false)
    guard parts.count == 2, let ms = UInt64(parts[0]), let seq = UInt64(parts[1]) else { return nil }
    return StreamKey(ms: ms, seq: seq)
  }

  struct StreamKey: Comparable {
    var ms: UInt64
    var seq: UInt64
    static func < (a: StreamKey, b: StreamKey) -> Bool { (a.ms, a.seq) < (b.ms, b.seq) }
  }
}
