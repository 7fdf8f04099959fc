import EventLoop
import Logging
import RelayCluster
import RelayCore
import RelayCrypto
import RelayProtocol
import RelayWebSocket

/// Cluster mode (contract §12; design and failure cases in docs/cluster.md): this
/// node's side of the shared log. It logs the inputs of this node's sockets, reads
/// every node's entries back in log order and hands them to the server's replica,
/// beats, logs `tick`s when it is the ticker, and reconnects to Redis with backoff.
///
/// Keys, all with the `{relay}` hash tag so they stay in one slot of a Redis Cluster:
/// - `relay:{relay}:generation`: the log generation's secret (hex). It names the log
///   and seeds the replicated core's ids; a Redis that lost it (restarted empty,
///   flushed) starts a new generation, and every node then resets.
/// - `relay:{relay}:nodes:GEN`: the counter that numbers nodes in a generation.
/// - `relay:{relay}:log:GEN`: the log, a Stream of entries (field `e`).
final class ClusterNode {
  enum State: Equatable {
    case down
    case connecting
    /// Registered; reading the log up to this node's own `join`.
    case catchingUp
    case ready
    case stopped
  }

  unowned let server: RelayServer
  let address: RedisAddress
  let name: String
  let nodeTimeoutMs: Int64
  private let logger: Logger
  private var commands: RedisConnection?
  private var reader: RedisConnection?
  private(set) var state = State.down
  /// This node's number in the current generation; 0 while it has none.
  private(set) var number: UInt32 = 0
  /// This node's `join` under `number` has been read back from the log: until then
  /// the replicas do not know the number, and a reconnect must join afresh.
  private var joinSeen = false
  private var generation: String?
  private var lastId = "0"
  private var backoffMs: UInt64 = 100
  private var housekeeping: EventLoop.Timer?
  private var reconnectTimer: EventLoop.Timer?
  private var tickTimer: EventLoop.Timer?
  private var armedTickMs: Int64?
  private var lastAppendMs: UInt64 = 0
  typealias PendingAppend = (entry: LogEntry, failed: (() -> Void)?)
  /// Inputs logged during this loop turn, sent together by `flushBatch`.
  private var batch: [PendingAppend] = []
  private var flushTimer: EventLoop.Timer?
  /// `closed` inputs that could not be logged yet: every replica must learn that a
  /// socket ended, or its participant would stay connected forever.
  private var unloggedCloses: [LogInput] = []
  private var onLeft: (() -> Void)?
  /// Runs each time the node becomes ready (joined and caught up).
  var onReady: (() -> Void)?
  /// Running totals for `/metrics`.
  private(set) var stats = ClusterStats()
  /// The append script's SHA1 once `SCRIPT LOAD`ed (`EVALSHA` sends 40 bytes, not
  /// the script); nil until then, or after Redis forgot it (`NOSCRIPT`).
  private var scriptSHA: [UInt8]?

  /// Beats are sent this often; a node is dead after `nodeTimeoutMs` without one.
  var beatMs: UInt64 { UInt64(max(50, min(1_000, nodeTimeoutMs / 4))) }

  init(server: RelayServer, address: RedisAddress, name: String, nodeTimeoutMs: Int64, logger: Logger) {
    self.server = server
    self.address = address
    self.name = name
    self.nodeTimeoutMs = nodeTimeoutMs
    self.logger = logger
  }

  var isReady: Bool { state == .ready }

  private var generationKey: [UInt8] { Array("relay:{relay}:generation".utf8) }
  private func logKey(_ g: String) -> [UInt8] { Array("relay:{relay}:log:\(g)".utf8) }
  private func nodesKey(_ g: String) -> [UInt8] { Array("relay:{relay}:nodes:\(g)".utf8) }

  // MARK: Connecting

  func start() {
    let timer = EventLoop.Timer(loop: server.loop)
    timer.start(afterMs: beatMs, repeatMs: beatMs) { [unowned self] in self.housekeep() }
    housekeeping = timer
    reconnectTimer = EventLoop.Timer(loop: server.loop)
    tickTimer = EventLoop.Timer(loop: server.loop)
    flushTimer = EventLoop.Timer(loop: server.loop)
    connect()
  }

  private func connect() {
    guard state == .down else { return }
    state = .connecting
    // A host name (`redis://redis:6379` in docker-compose) is looked up before each
    // attempt, on libuv's thread pool (`uv_getaddrinfo`): the loop serves meanwhile.
    HostResolver.resolve(address.host, on: server.loop) { [weak self] ip in self?.resolved(ip) }
  }

  private func resolved(_ ip: Result<String, LoopError>) {
    guard state == .connecting else { return }
    var address = self.address
    guard case .success(let ip) = ip else {
      logger.error("cannot resolve the Redis host", metadata: ["host": "\(address.host)"])
      return lostRedis()
    }
    address.host = ip
    RedisConnection.open(loop: server.loop, address: address) { [weak self] commands in
      guard let self, self.state == .connecting else { return commands?.close() ?? () }
      guard let commands else { return self.lostRedis() }
      RedisConnection.open(loop: self.server.loop, address: address) { [weak self] reader in
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
        self.bootstrap()
      }
    }
  }

  /// Reads (or founds) the generation, then joins it or carries on in it.
  private func bootstrap() {
    let fresh = Array(Crypto.hex(Crypto.randomBytes(32)).utf8)
    commands?.send([Array("SET".utf8), generationKey, fresh, Array("NX".utf8)]) { [weak self] _ in
      self?.commands?.send([Array("GET".utf8), self?.generationKey ?? []]) { [weak self] reply in
        guard let self, let g = reply?.string, !g.isEmpty else { return self?.dropConnections() ?? () }
        self.enter(generation: g)
      }
    }
  }

  private func enter(generation g: String) {
    if let old = generation, old != g {
      logger.warning("cluster state was lost in Redis: resetting this node", metadata: ["node": "\(name)"])
      server.resetClusterState(seed: Array(g.utf8))
      stats.resets += 1
      number = 0
      lastId = "0"
      unloggedCloses = []
    } else if generation == nil {
      server.resetClusterState(seed: Array(g.utf8))
    }
    generation = g
    backoffMs = 100
    loadScript()
    readLoop()
    if number == 0 || !joinSeen {
      join()
    } else {
      state = .ready
      let retry = unloggedCloses
      unloggedCloses = []
      for input in retry { append(input) }
      logger.info("cluster bus reconnected", metadata: ["node": "\(name)", "number": "\(number)"])
    }
  }

  /// Takes a new node number and logs `join`; ready once the join is read back.
  private func join() {
    guard let g = generation else { return }
    state = .catchingUp
    joinSeen = false
    commands?.send([Array("INCR".utf8), nodesKey(g)]) { [weak self] reply in
      guard let self else { return }
      guard case .integer(let n)? = reply, n > 0, n < 1 << 24 else { return self.dropConnections() }
      self.number = UInt32(n)
      self.server.replica?.localNode = self.number
      self.append(.join(name: self.name))
      self.logger.info("cluster node joined", metadata: ["node": "\(self.name)", "number": "\(n)"])
    }
  }

  private func lostRedis() {
    guard state != .down, state != .stopped else { return }
    let wasUp = state == .ready || state == .catchingUp
    state = .down
    commands?.close()
    reader?.close()
    commands = nil
    reader = nil
    tickTimer?.stop()
    armedTickMs = nil
    if wasUp { logger.error("cluster bus lost: Redis unreachable", metadata: ["node": "\(name)"]) }
    server.clusterBusLost()
    if let done = onLeft { onLeft = nil; return done() }
    let delay = backoffMs
    backoffMs = min(backoffMs * 2, 2_000)
    reconnectTimer?.start(afterMs: delay) { [unowned self] in self.connect() }
  }

  private func dropConnections() {
    commands?.close()
    reader?.close()
  }

  // MARK: Logging inputs

  /// Logs one input of this node. `failed` runs if it cannot be logged (no bus, or
  /// the generation changed under it); the caller answers `unavailable`.
  func append(_ input: LogInput, failed: (() -> Void)? = nil) {
    guard state == .ready || state == .catchingUp, number != 0, generation != nil, commands != nil else {
      if case .closed = input, number != 0 { unloggedCloses.append(input) }
      failed?()
      return
    }
    lastAppendMs = server.loop.nowMs
    if batch.isEmpty { flushTimer?.start(afterMs: 0) { [unowned self] in self.flushBatch() } }
    batch.append((LogEntry(node: number, wallMs: Loop.wallClockMs(), input: input), failed))
  }

  /// Everything this node logged during a loop turn goes to Redis as one stream
  /// entry (one append, one generation check), not one per input: the log's
  /// throughput is then Redis round trips per turn, not per message.
  private func flushBatch() {
    let entries = batch
    batch = []
    guard !entries.isEmpty else { return }
    guard let g = generation, commands != nil, entries[0].entry.node == number else {
      return failBatch(entries)
    }
    stats.appends += UInt64(entries.count)
    send(LogEntry.encodeBatch(entries.map(\.entry)), generation: g, bySHA: true, entries)
  }

  private func send(_ value: [UInt8], generation g: String, bySHA: Bool, _ entries: [PendingAppend]) {
    guard let commands else { return failBatch(entries) }
    let head = bySHA ? scriptSHA.map { [Array("EVALSHA".utf8), $0] } : nil
    let command = (head ?? [Array("EVAL".utf8), Self.appendScript])
      + [Array("2".utf8), generationKey, logKey(g), Array(g.utf8), value]
    commands.send(command) { [weak self] reply in
      guard let self else { return }
      switch reply {
      case .bulk?: return
      case .error(let message)? where message.hasPrefix("NOSCRIPT") && bySHA:
        // Redis restarted (or flushed its scripts): send the script itself once more.
        self.scriptSHA = nil
        self.send(value, generation: g, bySHA: false, entries)
        self.loadScript()
      case .error(let message)? where message.hasPrefix("RESET"):
        self.failBatch(entries)
        self.generationLost()
      default:
        self.failBatch(entries)
      }
    }
  }

  /// The appends of a batch that did not reach the log: their callers answer
  /// `unavailable`; socket closes are kept to be logged after a reconnect.
  private func failBatch(_ entries: [PendingAppend]) {
    stats.appendFailures += UInt64(entries.count)
    for (entry, failed) in entries {
      if case .closed = entry.input, entry.node == number { unloggedCloses.append(entry.input) }
      failed?()
    }
  }

  private func loadScript() {
    commands?.send([Array("SCRIPT".utf8), Array("LOAD".utf8), Self.appendScript]) { [weak self] reply in
      if case .bulk(let sha?)? = reply { self?.scriptSHA = sha }
    }
  }

  /// Appends only while the log's generation is still the node's: a Redis that lost
  /// its data (or was flushed) must not receive entries of the old log.
  private static let appendScript = Array(
    """
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('RESET generation changed') end
    return redis.call('XADD', KEYS[2], '*', 'e', ARGV[2])
    """.utf8)

  private func generationLost() {
    guard state == .ready || state == .catchingUp else { return }
    logger.warning("cluster generation changed in Redis", metadata: ["node": "\(name)"])
    dropConnections()  // reconnect → bootstrap → reset under the new generation
  }

  // MARK: Reading the log

  private func readLoop() {
    guard let reader, let g = generation else { return }
    let block: UInt64 = 1_000
    reader.send(
      [Array("XREAD".utf8), Array("COUNT".utf8), Array("1000".utf8), Array("BLOCK".utf8), Array(String(block).utf8),
       Array("STREAMS".utf8), logKey(g), Array(lastId.utf8)],
      limitMs: block + 5_000
    ) { [weak self] reply in
      guard let self, let reply, self.generation == g else { return }
      if case .array(let streams?) = reply { self.consume(streams) }
      if self.state == .ready || self.state == .catchingUp { self.readLoop() }
    }
  }

  /// `XREAD` reply: `[[key, [[id, [field, value, …]], …]]]`.
  private func consume(_ streams: [RESPValue]) {
    for stream in streams {
      guard case .array(let pair?) = stream, pair.count == 2, case .array(let items?) = pair[1] else { continue }
      for item in items {
        guard case .array(let parts?) = item, parts.count == 2, let id = parts[0].string else { continue }
        lastId = id
        guard case .array(let fields?) = parts[1], fields.count >= 2, let bytes = fields[1].bytes,
          let entries = LogEntry.decodeBatch(bytes)
        else { continue }
        for entry in entries {
          apply(entry)
          if state == .down || state == .stopped { return }
        }
      }
    }
    armTicker()
  }

  private func apply(_ entry: LogEntry) {
    stats.applied += 1
    guard let deaths = server.applyLogEntry(entry) else { return }
    stats.deaths += UInt64(deaths.count)
    if number != 0, deaths.contains(number) {
      logger.error("this node was declared dead by the cluster: rejoining", metadata: ["node": "\(name)"])
      stats.rejoins += 1
      number = 0
      unloggedCloses = []
      server.closeAllWebSockets(code: CloseCode.serviceRestart, reason: "node rejoining the cluster")
      join()
      return
    }
    if state == .catchingUp, entry.node == number, case .join = entry.input {
      joinSeen = true
      state = .ready
      logger.info("cluster node ready", metadata: ["node": "\(name)", "number": "\(number)"])
      onReady?()
    }
  }

  // MARK: Time

  private func housekeep() {
    commands?.checkOverdue()
    reader?.checkOverdue()
    guard state == .ready, server.loop.nowMs >= lastAppendMs + beatMs / 2 else { return }
    append(.beat)
  }

  /// The ticker (the live node with the lowest number, the same on every replica)
  /// logs a `tick` when the core's next deadline or a node's death is due.
  private func armTicker() {
    guard state == .ready, let replica = server.replica, replica.ticker == number else {
      tickTimer?.stop()
      armedTickMs = nil
      return
    }
    let due = [replica.core.nextDeadline, replica.nextDeathCheckMs].compactMap { $0 }.min()
    guard due != armedTickMs else { return }
    armedTickMs = due
    guard let due else { return tickTimer?.stop() ?? () }
    let delay = max(0, due - Loop.wallClockMs())
    tickTimer?.start(afterMs: UInt64(delay)) { [unowned self] in
      self.armedTickMs = nil
      self.append(.tick)
    }
  }

  // MARK: Leaving

  /// End of a drain: logs `leave` (so the node is gone, not dead), then closes.
  func leave(then done: @escaping () -> Void) {
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

  func close() {
    let done = onLeft
    onLeft = nil
    state = .stopped
    commands?.close()
    reader?.close()
    commands = nil
    reader = nil
    flushBatch()
    housekeeping?.close()
    reconnectTimer?.close()
    tickTimer?.close()
    flushTimer?.close()
    flushTimer = nil
    housekeeping = nil
    reconnectTimer = nil
    tickTimer = nil
    done?()
  }
}

/// Cluster counters for `/metrics` (docs/cluster.md, "Operating it").
struct ClusterStats {
  var appends: UInt64 = 0
  var appendFailures: UInt64 = 0
  var applied: UInt64 = 0
  /// Nodes this replica saw declared dead.
  var deaths: UInt64 = 0
  var rejoins: UInt64 = 0
  var resets: UInt64 = 0
}
