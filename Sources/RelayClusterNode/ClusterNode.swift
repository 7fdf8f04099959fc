import EventLoop
package import Logging
import RelayCluster
import RelayRedis
import RelayClusterDriver
import RelayCore
import RelayCrypto
import RelayProtocol
import RelayPrimitives

/// Cluster mode (contract §13.1; design and failure cases in docs/cluster.md): this
/// node's side of the shared log, a thin driver over Redis. It loads the newest
/// snapshot and reads the log's tail into its host's replica (`ReplicaHost`: the
/// server, which sees the node only as its `InputLog`), joins once caught up,
/// logs the inputs of this node's sockets, beats, logs `tick`s when it is the ticker,
/// stores snapshots when it is the ticker, and reconnects to Redis with backoff.
/// Every rule about what a record means lives in the replica (RelayCluster).
///
/// Keys, all with the `{relay}` hash tag so they stay in one slot of a Redis Cluster
/// (GEN is the generation's secret, hex):
/// - `relay:{relay}:generation`: the current generation.
/// - `relay:{relay}:meta:GEN`: `format rules configDigest` every node must share.
/// - `relay:{relay}:seq:GEN`: the position counter of the append script.
/// - `relay:{relay}:log:GEN`: the log, a Stream of records (fields `e`, `n`, `t`).
/// - `relay:{relay}:snapshot:GEN` (hash: pos, id, digest), `…:snapshot-bytes:GEN`, and
///   `…:snapshot-staging:GEN:N`: the newest snapshot, and node N's upload of the next.
package final class ClusterNode {
  typealias State = NodeLifecycle.State

  package unowned let host: any ReplicaHost
  let config: ClusterConfig
  let logger: Logger
  var commands: RedisConnection?
  var reader: RedisConnection?
  /// The node's life (NodeLifecycle.swift): its state, number, generation, read
  /// position and epoch, decided there; this adapter executes its actions.
  var lifecycle: NodeLifecycle
  var state: State { lifecycle.state }
  /// This node's number in the current generation; 0 while it has none.
  package var number: UInt32 { lifecycle.number }
  var generation: String? { lifecycle.generation }
  var lastId: String { lifecycle.lastId }
  /// Bumped whenever the replica is replaced: replies of reads issued for an older
  /// one are dropped.
  var readEpoch: UInt64 { lifecycle.readEpoch }
  /// The replica's clock was last advanced at this loop time: with the replica's clock,
  /// the node's estimate of the log's time now (its own wall clock is never used).
  var appliedAtLoopMs: UInt64 = 0
  var housekeeping: EventLoop.Timer?
  var reconnectTimer: EventLoop.Timer?
  var tickTimer: EventLoop.Timer?
  var lastAppendMs: UInt64 = 0
  typealias PendingAppend = (input: LogInput, failed: (() -> Void)?)
  /// Inputs logged during this loop turn, sent together by `flushBatch`.
  var batch: [PendingAppend] = []
  /// About the bytes of `batch` as a record.
  var batchBytes = 0
  var flushTimer: EventLoop.Timer?
  /// `closed` inputs that could not be logged yet: every replica must learn that a
  /// socket ended, or its participant would stay connected forever. Retried each beat.
  var unloggedCloses: [LogInput] = []
  var onLeft: (() -> Void)?
  /// Runs each time the node becomes ready (joined and caught up).
  package var onReady: (() -> Void)?
  /// Running totals for `/metrics`.
  package var stats = ClusterStats()
  /// The append path's decisions: backpressure, replicas, who is answered how.
  var driver: AppendDriver
  /// The callers of the batches the driver has not settled or failed yet.
  var sentAppends: [UInt64: SentAppend] = [:]
  var nextAppend: UInt64 = 0
  /// SHA1s of the scripts once `SCRIPT LOAD`ed; nil until then or after `NOSCRIPT`.
  var scriptSHAs: [RedisScript: [UInt8]] = [:]
  var appendErrorLog = RateLimitedLog(everyMs: 10_000)
  /// The snapshot being joined, digested or stored, and the due ones waiting
  /// (SnapshotQueue.swift).
  var snapshots = SnapshotQueue<SnapshotCapture>()
  /// With `redis+sentinel://`: asks the sentinels for the primary, follows failovers.
  var sentinels: SentinelClient?
  /// The primary the connections go (or went) to.
  var primary: RedisAddress? {
    didSet { driver.policy.primary = primary.map { "\($0.host):\($0.port)" } }
  }

  /// Beats are sent this often; a node is dead after `nodeTimeoutMs` without one.
  var beatMs: UInt64 { lifecycle.beatMs }

  package init(host: any ReplicaHost, config: ClusterConfig, logger: Logger) {
    self.host = host
    self.config = config
    self.logger = logger
    driver = AppendDriver(policy: ReplicaPolicy(minReplicas: config.minReplicas, followsFailovers: config.sentinel != nil))
    // Seeded per node, so nodes do not retry in step and join nonces differ.
    let seed = Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    lifecycle = NodeLifecycle(
      beatMs: UInt64(max(50, min(1_000, config.nodeTimeoutMs / 4))), random: SeededRandom(seed: seed))
  }

  /// Ready: joined, caught up, and appends succeed — not failing, and Redis not
  /// silent for longer than `stallMs` while it owes a reply (a Redis that hangs is as
  /// unready as one that refuses; one that answers a deep pipeline is only slow).
  package var isReady: Bool {
    guard state == .ready, !driver.failing else { return false }
    return commands?.responsive ?? true
  }

  static let stallMs: UInt64 = 1_000

  static let generationKey = Array("relay:{relay}:generation".utf8)
  static func key(_ kind: String, _ g: String) -> [UInt8] { Array("relay:{relay}:\(kind):\(g)".utf8) }

  // MARK: Connecting

  package func start() {
    let timer = EventLoop.Timer(loop: host.loop)
    timer.start(afterMs: beatMs, repeatMs: beatMs) { [unowned self] in self.housekeep() }
    housekeeping = timer
    reconnectTimer = EventLoop.Timer(loop: host.loop)
    tickTimer = EventLoop.Timer(loop: host.loop)
    flushTimer = EventLoop.Timer(loop: host.loop)
    startSentinels()
    connect()
  }

  func connect() { step(.connect) }

  func openConnections() {
    if let sentinels {
      // Each attempt asks the sentinels afresh: after a failover the old address is dead.
      return sentinels.locate { [weak self] found in self?.located(found) }
    }
    resolve(config.redis)
  }

  /// A host name (`redis://redis:6379` in docker-compose) is looked up before each
  /// attempt, on libuv's thread pool (`uv_getaddrinfo`): the loop serves meanwhile.
  func resolve(_ address: RedisAddress) {
    primary = address
    HostResolver.resolve(address.host, on: host.loop) { [weak self] ip in self?.resolved(ip, address) }
  }

  private func resolved(_ ip: Result<String, LoopError>, _ given: RedisAddress) {
    guard state == .connecting else { return }
    var address = given
    guard case .success(let ip) = ip else {
      logger.error("cannot resolve the Redis host", metadata: ["host": "\(address.host)"])
      return lostRedis()
    }
    address.host = ip
    let failed: (String) -> Void = { [weak self] in self?.connectFailed($0) }
    RedisConnection.open(loop: host.loop, address: address, tls: config.tls, failed: failed) { [weak self] commands in
      guard let self, self.state == .connecting else { return commands?.close() ?? () }
      guard let commands else { return self.lostRedis() }
      RedisConnection.open(loop: self.host.loop, address: address, tls: self.config.tls, failed: failed) {
        [weak self] reader in
        guard let self, self.state == .connecting, commands.isOpen else {
          commands.close()
          reader?.close()
          return
        }
        guard let reader else {
          commands.close()
          return self.lostRedis()
        }
        self.commands = commands
        self.reader = reader
        commands.onEnd = { [weak self] in self?.lostRedis() }
        reader.onEnd = { [weak self] in self?.lostRedis() }
        self.checkRole()
      }
    }
  }

  /// An evicting Redis may drop the log or the position counter under a live cluster:
  /// refuse it, unless the operator vouches for it (managed Redis that hides CONFIG).
  func checkPolicy() {
    guard !config.skipPolicyCheck else { return bootstrap() }
    commands?.send([Array("CONFIG".utf8), Array("GET".utf8), Array("maxmemory-policy".utf8)]) { [weak self] reply in
      guard let self, let reply else { return }
      guard case .array(let items?) = reply, items.count == 2, let policy = items[1].string else {
        return self.host.fatal(
          "cannot read Redis's maxmemory-policy (CONFIG GET refused): pass --redis-skip-policy-check if this Redis never evicts")
      }
      guard !policy.hasPrefix("allkeys") else {
        return self.host.fatal(
          "Redis maxmemory-policy is \(policy): it may evict the cluster's log; set noeviction (or pass --redis-skip-policy-check)")
      }
      self.bootstrap()
    }
  }

  /// Reads (or founds) the generation, checks that this node may join it, then loads
  /// its state and reads on.
  func bootstrapReplacing(_ stale: String) { bootstrap(replacing: stale) }

  private func bootstrap(replacing stale: String? = nil) {
    let fresh = Crypto.hex(Crypto.randomBytes(32))
    var keys = [Self.generationKey, Self.key("meta", fresh), Self.key("seq", fresh)]
    if let stale { keys += ["meta", "seq", "log", "snapshot", "snapshot-bytes"].map { Self.key($0, stale) } }
    let args = [Array(fresh.utf8), Array(ruleLine.utf8), Array((stale ?? "").utf8)]
    run(.found, keys: keys, args: args) { [weak self] reply in
      guard let self, let g = reply?.string, !g.isEmpty else { return self?.dropConnections() ?? () }
      self.checkGeneration(g)
    }
  }

  private func checkGeneration(_ g: String) {
    commands?.send([Array("MGET".utf8), Self.key("meta", g), Self.key("seq", g)]) { [weak self] reply in
      guard let self, case .array(let items?)? = reply, items.count == 2 else { return self?.dropConnections() ?? () }
      guard let meta = items[0].string, items[1].string != nil else {
        // The generation's keys are gone (evicted, deleted by hand): it cannot be
        // trusted any more. Replace it; every node then resets into the new one.
        self.logger.error("cluster generation keys are missing in Redis: starting a new generation")
        return self.bootstrap(replacing: g)
      }
      if meta != self.ruleLine {
        if self.olderRules(meta: meta) { return self.requestUpgrade(generation: g) }
        return self.host.fatal(self.refusal(meta: meta))
      }
      self.enter(generation: g)
    }
  }

  private func enter(generation g: String) {
    loadScripts()
    step(.enter(generation: g, hasReplica: host.replica != nil))
  }

  func lostRedis() { step(.redisLost(leaving: onLeft != nil)) }

  /// The connections ended (NodeLifecycle decided the node is down).
  func busLost(wasUp: Bool) {
    commands?.close()
    reader?.close()
    commands = nil
    reader = nil
    tickTimer?.stop()
    if wasUp { logger.error("cluster bus lost: Redis unreachable", metadata: ["node": "\(config.nodeId)"]) }
    host.clusterBusLost()
    if let done = onLeft { onLeft = nil; done() }
  }

  func dropConnections() {
    commands?.close()
    reader?.close()
  }

  // MARK: Reading the log

  func readLoop(_ g: String, epoch: UInt64, from lastId: String) {
    guard let reader else { return }
    let block: UInt64 = 1_000
    reader.send(
      [Array("XREAD".utf8), Array("COUNT".utf8), Array(String(NodeLifecycle.readCount).utf8), Array("BLOCK".utf8),
       Array(String(block).utf8), Array("STREAMS".utf8), Self.key("log", g), Array(lastId.utf8)],
      limitMs: block + 5_000
    ) { [weak self] reply in
      guard let self, let reply, self.reading(g, epoch) else { return }
      self.whenReplicated(reply, reading: { [weak self] in self?.reading(g, epoch) ?? false }) { [weak self] in
        self?.consumeRead(reply, generation: g, epoch: epoch)
      }
    }
  }

  private func consumeRead(_ reply: RESPValue, generation g: String, epoch: UInt64) {
    guard reading(g, epoch) else { return }
    var count = 0
    if case .array(let streams?) = reply { count = consume(streams, generation: g, epoch: epoch) }
    guard reading(g, epoch) else { return }
    step(.readEnded(epoch: epoch, count: count, tickerView))
  }

  /// Whether reads issued for generation `g` and replica `epoch` still count.
  func reading(_ g: String, _ epoch: UInt64) -> Bool { lifecycle.reading(g, epoch) }

  /// `XREAD` reply: `[[key, [[id, [field, value, …]], …]]]`. Returns the records seen.
  private func consume(_ streams: [RESPValue], generation g: String, epoch: UInt64) -> Int {
    var count = 0
    for stream in streams {
      guard case .array(let pair?) = stream, pair.count == 2, case .array(let items?) = pair[1] else { continue }
      for item in items {
        guard case .array(let parts?) = item, parts.count == 2, let id = parts[0].string else { continue }
        count += 1
        var fields: [[UInt8]?] = []
        if case .array(let list?) = parts[1] { fields = list.map(\.bytes) }
        apply(RawRecord(id: id, fields: fields), epoch: epoch)
        if !reading(g, epoch) { return count }
      }
    }
    return count
  }

  /// Applies a record to the replica; what it means for this node is NodeLifecycle's.
  private func apply(_ raw: RawRecord, epoch: UInt64) {
    guard let replica = host.replica else { return step(.applied(id: raw.id, epoch: epoch, .init())) }
    stats.applied += 1
    let applied = host.applyRecord(raw)
    if driver.inFlight > 0, let record = raw.batch { perform(driver.handle(.applied(record: record))) }
    appliedAtLoopMs = host.loop.nowMs
    if let reason = applied.rejected { rejected(raw.id, reason) }
    if !applied.lostRecords { stats.deaths += UInt64(applied.deaths.count) }
    var outcome = NodeLifecycle.Outcome()
    outcome.lostRecords = applied.lostRecords
    outcome.upgrade = applied.upgrade != nil
    outcome.deaths = applied.deaths
    outcome.listed = number == 0 || replica.nodes[number] != nil
    outcome.joined = applied.joined.map { NodeLifecycle.Admitted(nonce: $0.nonce, number: $0.number) }
    outcome.refused = applied.refusedJoins.map { NodeLifecycle.Refused(nonce: $0.nonce, reason: $0.reason) }
    outcome.snapshotDue = applied.snapshotDue
    outcome.diverged = applied.diverged
    for action in lifecycle.handle(.applied(id: raw.id, epoch: epoch, outcome)) {
      guard case .handOver = action, let upgrade = applied.upgrade else { execute(action); continue }
      handedOver(to: upgrade.rules, handoffBy: upgrade.handoffBy, raw: raw)
    }
  }

  private func rejected(_ id: String, _ reason: String) {
    stats.rejected += 1
    logger.warning("cluster log record rejected", metadata: ["id": "\(id)", "reason": "\(reason)"])
  }

  // MARK: Time

  private func housekeep() {
    commands?.checkOverdue(stallMs: Self.stallMs)
    reader?.checkOverdue(stallMs: Self.stallMs)
    perform(driver.handle(.expire(nowMs: host.loop.nowMs)))
    step(.housekeep(nowMs: host.loop.nowMs, lastAppendMs: lastAppendMs, unloggedCloses: unloggedCloses.count))
  }

  /// The log's time now, as this node estimates it: the replica's clock plus the
  /// loop time since it last moved.
  var logNowMs: Int64 {
    (host.replica?.clockMs ?? 0) + Int64(host.loop.nowMs &- appliedAtLoopMs)
  }

  /// What the ticker's timer waits for: the core's next deadline or a node's death.
  var tickerView: NodeLifecycle.TickerView {
    guard let replica = host.replica else { return .init(isTicker: false, dueMs: nil, logNowMs: logNowMs) }
    let due = [replica.core.nextDeadline, replica.nextDeathCheckMs].compactMap { $0 }.min()
    return .init(isTicker: replica.ticker == number, dueMs: due, logNowMs: logNowMs)
  }

  // MARK: Leaving

  /// End of a drain: logs `leave` (so the node is gone, not dead), then closes.
  package func leave(then done: @escaping () -> Void) {
    guard state == .ready, number != 0 else {
      close()
      return done()
    }
    onLeft = done
    append(.leave) { [weak self] in self?.close() }
    flushBatch()  // now, not next turn: the PING below must follow it
    commands?.send([Array("PING".utf8)]) { [weak self] _ in
      self?.close()
    }
  }

  package func close() {
    let done = onLeft
    onLeft = nil
    step(.close)
    commands?.close()
    reader?.close()
    commands = nil
    reader = nil
    sentinels?.stop()
    flushBatch()
    perform(driver.handle(.historyEnded))
    for timer in [housekeeping, reconnectTimer, tickTimer, flushTimer] { timer?.close() }
    flushTimer = nil
    housekeeping = nil
    reconnectTimer = nil
    tickTimer = nil
    done?()
  }
}
