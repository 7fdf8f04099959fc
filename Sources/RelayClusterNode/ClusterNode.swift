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
  enum State: Equatable {
    case down
    case connecting
    /// Reading the log up to its end (then joining), or waiting for its own join.
    case catchingUp
    case ready
    case stopped
  }

  package unowned let host: any ReplicaHost
  let config: ClusterConfig
  let logger: Logger
  var commands: RedisConnection?
  var reader: RedisConnection?
  var state = State.down
  /// This node's number in the current generation; 0 while it has none.
  package var number: UInt32 = 0
  /// The nonce of the join this node is waiting for, if any.
  var pendingJoin: UInt64?
  var generation: String?
  var lastId = "0"
  /// The replica's clock was last advanced at this loop time: with the replica's clock,
  /// the node's estimate of the log's time now (its own wall clock is never used).
  var appliedAtLoopMs: UInt64 = 0
  /// Failed Redis connects since the last success, and their delays (full jitter,
  /// 100 ms doubling to 2 s, seeded per node so nodes do not retry in step).
  var redisAttempts = 0
  let redisBackoff = Backoff(baseMs: 100, capMs: 2_000)
  var redisJitter = SeededRandom(seed: Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
  var housekeeping: EventLoop.Timer?
  var reconnectTimer: EventLoop.Timer?
  var tickTimer: EventLoop.Timer?
  var armedTickMs: Int64?
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
  /// Consecutive rebuilds from a snapshot that met missing records again.
  var rebuildsWithoutProgress = 0
  /// Bumped whenever the replica is replaced: replies of reads issued for an older
  /// one are dropped.
  var readEpoch: UInt64 = 0
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
  var beatMs: UInt64 { UInt64(max(50, min(1_000, config.nodeTimeoutMs / 4))) }

  package init(host: any ReplicaHost, config: ClusterConfig, logger: Logger) {
    self.host = host
    self.config = config
    self.logger = logger
    driver = AppendDriver(policy: ReplicaPolicy(minReplicas: config.minReplicas, followsFailovers: config.sentinel != nil))
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

  func connect() {
    guard state == .down else { return }
    state = .connecting
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
    redisAttempts = 0
    loadScripts()
    if let old = generation, old == g, host.replica != nil {
      // Same generation: carry on from where this replica was — once the log is
      // known to still hold what it applied (a failover may have lost a tail).
      return verifyHistory(g) { [weak self] in
        guard let self else { return }
        self.state = .catchingUp
        self.perform(self.driver.handle(.reconnected))
        self.readLoop()
        if self.number != 0 && self.pendingJoin == nil { self.becomeReady(reconnected: true) }
      }
    }
    perform(driver.handle(.historyEnded))
    if generation != nil {
      logger.warning("cluster state was lost in Redis: resetting this node", metadata: ["node": "\(config.nodeId)"])
      stats.resets += 1
    }
    generation = g
    number = 0
    pendingJoin = nil
    unloggedCloses = []
    loadSnapshot()
  }

  func lostRedis() {
    guard state != .down, state != .stopped else { return }
    let wasUp = state == .ready || state == .catchingUp
    state = .down
    commands?.close()
    reader?.close()
    commands = nil
    reader = nil
    tickTimer?.stop()
    armedTickMs = nil
    if wasUp { logger.error("cluster bus lost: Redis unreachable", metadata: ["node": "\(config.nodeId)"]) }
    host.clusterBusLost()
    if let done = onLeft { onLeft = nil; return done() }
    let delay = UInt64(redisBackoff.delayMs(attempt: redisAttempts, using: &redisJitter))
    redisAttempts += 1
    reconnectTimer?.start(afterMs: delay) { [unowned self] in self.connect() }
  }

  func dropConnections() {
    commands?.close()
    reader?.close()
  }

  // MARK: Reading the log

  /// Caught up once a read returns fewer records than it asked for.
  static let readCount = 1_000

  func readLoop() {
    guard let reader, let g = generation else { return }
    let epoch = readEpoch
    let block: UInt64 = 1_000
    reader.send(
      [Array("XREAD".utf8), Array("COUNT".utf8), Array(String(Self.readCount).utf8), Array("BLOCK".utf8),
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
    if count < Self.readCount {
      perform(driver.handle(.caughtUp))
      caughtUp()
    }
    armTicker()
    readLoop()
  }

  /// Whether reads issued for generation `g` and replica `epoch` still count.
  func reading(_ g: String, _ epoch: UInt64) -> Bool {
    generation == g && readEpoch == epoch && (state == .ready || state == .catchingUp)
  }

  /// `XREAD` reply: `[[key, [[id, [field, value, …]], …]]]`. Returns the records seen.
  private func consume(_ streams: [RESPValue], generation g: String, epoch: UInt64) -> Int {
    var count = 0
    for stream in streams {
      guard case .array(let pair?) = stream, pair.count == 2, case .array(let items?) = pair[1] else { continue }
      for item in items {
        guard case .array(let parts?) = item, parts.count == 2, let id = parts[0].string else { continue }
        count += 1
        lastId = id
        var fields: [[UInt8]?] = []
        if case .array(let list?) = parts[1] { fields = list.map(\.bytes) }
        apply(RawRecord(id: id, fields: fields))
        if !reading(g, epoch) { return count }
      }
    }
    return count
  }

  /// The end of the log is reached: join if this node has no number yet.
  private func caughtUp() {
    guard state == .catchingUp, number == 0, pendingJoin == nil else { return }
    join()
  }

  /// Logs `join` with a fresh nonce; the number comes back with the applied record.
  func join() {
    state = .catchingUp
    let nonce = UInt64.random(in: 1...UInt64.max)
    pendingJoin = nonce
    appendNow(
      .join(JoinRequest(name: config.nodeId, nonce: nonce, rules: host.clusterRules)), node: 0
    )
  }

  private func apply(_ raw: RawRecord) {
    guard let replica = host.replica else { return }
    stats.applied += 1
    let applied = host.applyRecord(raw)
    if driver.inFlight > 0, let record = raw.batch { perform(driver.handle(.applied(record: record))) }
    appliedAtLoopMs = host.loop.nowMs
    if let reason = applied.rejected { rejected(raw.id, reason) }
    if applied.lostRecords { return rebuild(reason: "records missing from the log") }
    stats.deaths += UInt64(applied.deaths.count)
    if let upgrade = applied.upgrade { return handedOver(to: upgrade.rules, handoffBy: upgrade.handoffBy, raw: raw) }
    if number != 0, applied.deaths.contains(number) || replica.nodes[number] == nil && pendingJoin == nil {
      return declaredDead()
    }
    if let pending = pendingJoin {
      if let mine = applied.joined.first(where: { $0.nonce == pending }) { return joined(mine.number) }
      if let refused = applied.refusedJoins.first(where: { $0.nonce == pending }) {
        return host.fatal("the cluster refused this node: \(refused.reason)")
      }
    }
    if let position = applied.snapshotDue { snapshotDue(at: position, id: raw.id) }
    if let position = applied.diverged { diverged(at: position) }
  }

  private func rejected(_ id: String, _ reason: String) {
    stats.rejected += 1
    logger.warning("cluster log record rejected", metadata: ["id": "\(id)", "reason": "\(reason)"])
  }

  private func joined(_ n: UInt32) {
    number = n
    pendingJoin = nil
    host.replica?.localNode = n
    logger.info("cluster node joined", metadata: ["node": "\(config.nodeId)", "number": "\(n)"])
    becomeReady(reconnected: false)
  }

  private func becomeReady(reconnected: Bool) {
    state = .ready
    let retry = unloggedCloses
    unloggedCloses = []
    for input in retry { append(input) }
    if reconnected {
      logger.info("cluster bus reconnected", metadata: ["node": "\(config.nodeId)", "number": "\(number)"])
    } else {
      logger.info("cluster node ready", metadata: ["node": "\(config.nodeId)", "number": "\(number)"])
      onReady?()
    }
  }

  private func declaredDead() {
    logger.error("this node was declared dead by the cluster: rejoining", metadata: ["node": "\(config.nodeId)"])
    stats.rejoins += 1
    number = 0
    unloggedCloses = []
    host.replica?.localNode = 0
    host.closeAllWebSockets(code: CloseCode.serviceRestart, reason: "node rejoining the cluster")
    join()
  }

  // MARK: Time

  private func housekeep() {
    commands?.checkOverdue(stallMs: Self.stallMs)
    reader?.checkOverdue(stallMs: Self.stallMs)
    perform(driver.handle(.expire(nowMs: host.loop.nowMs)))
    guard state == .ready else { return }
    let retry = unloggedCloses
    unloggedCloses = []
    for input in retry { append(input) }
    if host.loop.nowMs >= lastAppendMs + beatMs / 2 { append(.beat) }
  }

  /// The log's time now, as this node estimates it: the replica's clock plus the
  /// loop time since it last moved.
  var logNowMs: Int64 {
    (host.replica?.clockMs ?? 0) + Int64(host.loop.nowMs &- appliedAtLoopMs)
  }

  /// The ticker (the live node with the lowest number, the same on every replica)
  /// logs a `tick` when the core's next deadline or a node's death is due.
  func armTicker() {
    guard state == .ready, let replica = host.replica, replica.ticker == number else {
      tickTimer?.stop()
      armedTickMs = nil
      return
    }
    let due = [replica.core.nextDeadline, replica.nextDeathCheckMs].compactMap { $0 }.min()
    guard due != armedTickMs else { return }
    armedTickMs = due
    guard let due else { return tickTimer?.stop() ?? () }
    let delay = max(0, min(due - logNowMs, 3_600_000))
    tickTimer?.start(afterMs: UInt64(delay)) { [unowned self] in
      self.armedTickMs = nil
      self.append(.tick)
    }
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
    state = .stopped
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
