import EventLoop
import Logging
import RelayCluster
import RelayRedis
import RelayClusterDriver

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
  /// The channel of the readers' probes (no subscriber needs it: the publish is the write).
  static let probeChannel = Array("relay:{relay}:replicated".utf8)

  // MARK: Sentinel

  func startSentinels() {
    guard let address = config.sentinel else { return }
    let client = SentinelClient(loop: host.loop, address: address, tls: config.tls, logger: logger)
    client.onSwitch = { [weak self] primary in self?.switched(to: primary) }
    client.startWatching()
    sentinels = client
  }

  /// The sentinels' answer to "which is the primary?" for one connection attempt.
  func located(_ found: RedisAddress?) {
    guard state == .connecting else { return }
    guard let found else {
      let (log, held) = appendErrorLog.admit(nowMs: host.loop.nowMs)
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
    step(.primarySwitched)
  }

  /// The address a sentinel named may be stale (a demoted primary still listed, a
  /// failover under way): write only to a Redis that says it is the primary.
  func checkRole() {
    guard config.sentinel != nil else { return checkPolicy() }
    commands?.send([Array("ROLE".utf8)]) { [weak self] reply in
      guard let self, let reply else { return }
      guard case .array(let items?) = reply, items.first?.string == "master" else {
        let (log, held) = self.appendErrorLog.admit(nowMs: self.host.loop.nowMs)
        if log {
          self.logger.warning(
            "the Redis the sentinels named is not a primary: asking again", metadata: ["held": "\(held)"])
        }
        return self.dropConnections()
      }
      // ["master", offset, [[ip, port, offset], …]]: the replicas in sync now.
      if items.count > 2, case .array(let replicas?) = items[2] {
        self.perform(self.driver.handle(.replicas(Int64(replicas.count))))
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
    let (log, held) = appendErrorLog.admit(nowMs: host.loop.nowMs)
    if log { logger.error("cannot use the Redis connection", metadata: ["reason": "\(reason)", "held": "\(held)"]) }
  }

  // MARK: History after a failover

  /// Whether the log of the generation still holds the last record this node applied
  /// (or lost it only to trimming behind a snapshot, which the reader handles); if
  /// not, this Redis lost records the node acted upon: NodeLifecycle starts a new
  /// generation.
  func verifyHistory(lastApplied mine: String) {
    guard let g = generation, let commands else { return step(.historyChecked(.intact)) }
    let log = Self.key("log", g)
    var found: String?
    commands.send([Array("XRANGE".utf8), log, Array(mine.utf8), Array(mine.utf8)]) { reply in
      found = Self.firstId(reply)
    }
    commands.send([Array("XRANGE".utf8), log, Array("-".utf8), Array("+".utf8), Array("COUNT".utf8), Array("1".utf8)]) {
      [weak self] reply in
      guard let self, let reply, self.generation == g, self.state == .connecting else { return }
      self.step(.historyChecked(LogHistory.check(lastApplied: mine, found: found, first: Self.firstId(reply))))
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
    waitForReplicas(driver.policy.required, on: connection) { [weak self] reply in
      guard let self, reading() else { return }
      switch self.driver.policy.readWait(WaitAnswer(reply), probed: probed()) {
      case .apply:
        then()
      case .waitAgain(let n):
        self.appendFailed("NOREPLICAS \(n) of \(self.driver.policy.required) replicas hold the records read")
        self.awaitReplicas(on: connection, reading: reading, probed: probed, then)
      case .drop(let message):
        if let message { self.appendFailed(message) }
        self.dropConnections()
      case .ended:
        return  // the connection ended: the reconnect reads again from the last applied record
      }
    }
  }

  /// `WAIT N deadline` on `connection`: how many replicas hold its writes so far.
  func waitForReplicas(_ n: Int, on connection: RedisConnection, _ reply: @escaping (RESPValue?) -> Void) {
    let args = ["WAIT", String(n), String(AppendDriver.replicationWaitMs)].map { Array($0.utf8) }
    connection.send(args, limitMs: AppendDriver.replicationWaitMs + 2_000, reply)
  }
}
