package import EventLoop
package import RelayCluster
public import Logging
import RelayCore
public import RelayProtocol
import RelayCrypto
import RelayWebSocket
import RelayPrimitives
import CoreMetrics
import Prometheus

/// The I/O shell: owns the loop, the listener and every connection, feeds the
/// pure core, and turns its effects into writes. Single-threaded by design: all of
/// it runs on one libuv loop (DESIGN.md, "libuv and Swift 6 rules").
public final class RelayServer {
  public let config: ServerConfig
  let logger: Logger
  package let loop: Loop
  /// The relay's state machine; in cluster mode, this node's replica's core (a new
  /// one when the cluster's state is reset).
  var core: RelayCore
  let verifyToken: (String, Int64) -> Identity?
  /// Cluster mode (contract §12): the bus and the replica; nil standalone. Only
  /// `inputs` is asked anything.
  private var cluster: ClusterNode?
  /// `--data-dir`: the durable single node's log (DiskLog.swift); nil otherwise.
  /// Only `inputs` is asked anything.
  var disk: DiskLog?
  /// Where every input of the core goes: the cluster node, the data dir, or the core
  /// at once. Chosen on first use, which `start()` precedes.
  private(set) lazy var inputs: any InputLog = chooseInputs()

  private func chooseInputs() -> any InputLog {
    if let cluster { return cluster }
    if let disk { return disk }
    return LocalLog(server: self)
  }
  package var replica: Replica?
  /// §5 pings and timeouts of this process's relay sockets, in every mode
  /// (RelayServer+Heartbeats.swift), and the one timer that fires them.
  var heartbeats: Heartbeats
  var heartbeatTimer: EventLoop.Timer?
  var armedHeartbeatMs: Int64?
  /// Cluster mode: the admin requests waiting for their log entry.
  var pendingAdmin: [UInt64: ServerConnection] = [:]
  /// `Effect.push` jobs this node performed (`relay_push_jobs_total`).
  var pushJobsPerformed: UInt64 = 0
  /// §9a pushes (PushService.swift); nil without `config.push`.
  var pushService: PushService?
  var nextAdminRequest: UInt64 = 1
  /// Text messages given to the core (for sampling their duration).
  var commandCount: UInt64 = 0
  let metrics = ServerMetrics()
  private var listener: TCPListener?
  var connections = RefTable<ServerConnectionsById>()
  var nextConnection: UInt64 = 1
  private var headDeadlines = DeadlineLane<UInt64>()
  /// TLS (`--tls-cert`): the context new connections get, their handshake deadlines.
  var tlsContext: TLSContext?
  var tlsDeadlines = DeadlineLane<UInt64>()
  var tlsStats = TLSStats()
  private var closeDeadlines = DeadlineLane<UInt64>()
  /// The slow sweep for the FIFO deadlines (the core's own are the input log's).
  private var sweepTimer: EventLoop.Timer?
  private var signals: [SignalWatcher] = []
  /// Cluster mode: the listener is bound at start but listens once the node is ready.
  private var listening = false
  private var listenFallback: EventLoop.Timer?
  /// Reused for the events of each WebSocket read, so a read allocates no array.
  var readScratch: [ReadEvent] = []
  package private(set) var draining = false
  private(set) var websocketCount = 0
  /// The heartbeat ping (empty payload), framed once and shared by every connection.
  private let pingFrame = Framing.frame(.ping, [])
  private(set) var stopped = false
  private var drainStartedMs: Int64 = 0
  /// `--webhook-url` deliveries (contract §11); nil when not configured.
  var webhookClient: WebhookClient?
  /// Slow-consumer closes, the process-wide outbound budget, heap trimming.
  let outbound = OutboundBudget()
  /// Reads kept for a later turn (RelayServer+Turns.swift).
  let deferredReads = DeferredReads()

  public init(config: ServerConfig, logger: Logger, verifyToken: @escaping (String, Int64) -> Identity?) {
    self.config = config
    self.logger = logger
    self.loop = Loop()
    var coreConfig = config.core
    coreConfig.sessionWebhooks = config.webhookURL != nil
    self.verifyToken = verifyToken
    self.core = RelayCore(config: coreConfig, ids: CryptoIdentifiers(), verifyToken: verifyToken)
    heartbeats = Self.makeHeartbeats(config.core)
    let (turnHistogram, turnCpuHistogram) = (metrics.loopTurn, metrics.loopTurnCpu)
    loop.onTurn = { turnHistogram.recordNanoseconds(Int64(clamping: $0)); turnCpuHistogram.recordNanoseconds(Int64(clamping: $1)) }
    loop.flushBudgetNs = UInt64(max(0, config.turnWriteBudgetMs)) * 1_000_000
    // protocol/ §5.6: a turn's membership events go out as one diff per session.
    loop.beforeCork = { [unowned self] in
      self.inputs.beforeFlush()  // the turn's records are written before anything they caused goes out
      guard self.core.hasPendingPresenceDiffs else { return }
      self.core.flushPresenceDiffs()
      self.applyEffects()
    }
    if let c = config.cluster {
      cluster = ClusterNode(host: self, config: c, logger: logger)
    }
  }

  /// The bound port (useful with port 0).
  public private(set) var boundPort = 0

  /// Binds and listens. Throws on bind failure or a refused configuration.
  public func start() throws {
    // Each connection is a descriptor: take the whole hard limit, not the soft default.
    let files = Loop.raiseOpenFileLimit(to: 1 << 20)
    logger.debug("open file limit", metadata: ["limit": "\(files)"])
    let l: TCPListener
    do {
      try startDisk()
      try loadTLS()
      webhookClient = try makeWebhookClient()
      pushService = try makePushService()
      l = try TCPListener(loop: loop, host: config.host, port: config.port)
      l.sendBufferBytes = config.socketSendBufferBytes
      // A cluster node listens once it has joined and caught up with the log, so a
      // client that waits for /healthz never meets a node that would refuse its
      // upgrade; after `clusterListenGraceMs` it listens anyway (Redis may be down:
      // then /readyz says 503 while /healthz answers, contract §12).
      if inputs.listensAtOnce { try l.listen { [unowned self] tcp in self.accept(tcp) } }
    } catch {
      webhookClient?.close()
      webhookClient = nil
      pushService?.close()
      pushService = nil
      inputs.stop(force: true)
      inputs.loopEnded()
      loop.close()  // nothing else was created yet; every handle is closed before the loop goes
      throw error
    }
    listener = l
    boundPort = l.port
    let sweep = EventLoop.Timer(loop: loop)
    sweep.start(afterMs: 250, repeatMs: 250) { [unowned self] in self.sweep() }
    sweepTimer = sweep
    inputs.start { [unowned self] in self.listenOnce() }
    if !inputs.listensAtOnce {
      let fallback = EventLoop.Timer(loop: loop)
      fallback.start(afterMs: Self.clusterListenGraceMs) { [unowned self] in self.listenOnce() }
      listenFallback = fallback
    }
    for sig in [SIGTERM_NUMBER, SIGINT_NUMBER] {
      signals.append(SignalWatcher(loop: loop, signal: sig) { [unowned self] in self.beginDrain() })
    }
    if tlsContext != nil {
      signals.append(SignalWatcher(loop: loop, signal: SIGHUP_NUMBER) { [unowned self] in self.reloadTLS() })
    }
    logger.info("relay listening", metadata: ["address": "\(config.host):\(boundPort)", "dev": "\(config.devMode)"])
  }

  /// How long a cluster node waits for the bus before listening anyway.
  static let clusterListenGraceMs: UInt64 = 2_000

  /// Cluster mode: starts accepting (once).
  private func listenOnce() {
    listenFallback?.close()
    listenFallback = nil
    guard !listening, !stopped, let listener else { return }
    listening = true
    do {
      try listener.listen { [unowned self] tcp in self.accept(tcp) }
    } catch {
      logger.critical("cannot listen on \(config.host):\(boundPort): \(error)")
      beginDrain()
    }
  }

  /// Runs the loop until the server has drained and closed everything.
  public func run() {
    loop.run()
    inputs.loopEnded()
    loop.close()
  }

  /// Non-zero when the server stopped for a reason the operator must fix (`fatal`).
  public private(set) var exitCode: Int32 = 0

  /// A condition this process cannot serve under (a cluster that refuses it, an
  /// evicting Redis): logged, then the process stops with a non-zero status.
  package func fatal(_ message: String) {
    logger.critical("\(message)")
    exitCode = 3
    finishDrain(force: true)
  }

  /// A rolling upgrade handed the cluster over to newer nodes: this one drains and
  /// exits normally (docs/cluster.md, "Rolling upgrades").
  package func superseded() {
    logger.notice("this node's generation was handed over to newer nodes: exiting")
    inputs.stop(force: true)  // it must not follow the generation it cannot join
    beginDrain()
  }

  // MARK: Time

  /// The instant of an input: the loop's monotonic time orders deadlines; the wall
  /// clock is read fresh (a vDSO call) so `ts`, `sentAt` and JWT checks agree with
  /// the clients' clocks to the millisecond. The core keeps `raisedAt` monotonic
  /// itself should the wall clock step back.
  var now: Instant {
    let mono = Int64(loop.nowMs)
    return Instant(monoMs: mono, wallMs: Loop.wallClockMs(), lateMs: max(loop.readLatenessMs, deferredReads.waitedMs))
  }

  // MARK: Accept

  private func accept(_ tcp: TCPConnection) {
    if outbound.socketSendBufferBytes == 0 { outbound.socketSendBufferBytes = tcp.sendBufferSize }
    let conn = adopt(tcp)
    tcp.delegate = conn
    tcp.startReading()
  }

  /// Gives a new transport its pipeline: the connection table, the head deadline,
  /// TLS when configured. Tests adopt in-memory transports the same way.
  func adopt(_ transport: any ConnectionTransport) -> ServerConnection {
    let id = makeConnectionID()
    let conn = ServerConnection(
      server: self, id: id, transport: transport, maxHeadBytes: config.maxHeadBytes,
      maxMessageBytes: config.maxMessageBytes)
    transport.maxOutboundBytes = config.maxOutboundBytes
    connections.insert(conn)
    headDeadlines.add(id.raw, dueMs: now.monoMs + config.headTimeoutMs)
    startTLS(conn)
    metrics.connectionsAccepted.increment()
    metrics.connectionsOpen.record(connections.count)
    return conn
  }

  // MARK: What a connection's pipeline asks of the server

  /// The WebSocket endpoint a request upgrades to, or nil for a plain HTTP request.
  func endpoint(for head: HTTPRequestHead) -> Endpoint? {
    if head.path == "/v1/ws" { return .relay }
    if config.echo && head.path == "/v1/echo" { return .echo }
    return nil
  }

  /// Why an upgrade is answered 503 now, or nil to go on with the handshake.
  func upgradeRefusal(_ conn: ServerConnection) -> String? {
    if !isReady { return draining ? "draining" : stateUnavailable }
    // Accepted under a node number this node no longer has (it rejoined).
    if !inputs.owns(conn.id) { return "node rejoining the cluster" }
    return nil
  }

  func webSocketOpened(_ conn: ServerConnection, _ endpoint: Endpoint) {
    websocketCount += 1
    metrics.websocketsOpen.record(websocketCount)
    guard endpoint == .relay else { return }
    heartbeatOpened(conn)
    inputs.open(conn.id)
  }

  /// A WebSocket left the open ones (closing handshake done, slow consumer, dead
  /// peer, socket gone): drain completion and the open-WebSockets gauge read this.
  func webSocketLeft(_ conn: ServerConnection) {
    websocketCount -= 1
    metrics.websocketsOpen.record(websocketCount)
    if draining, !stopped, websocketCount == 0 { finishDrain(force: false) }
  }

  /// protocol/ §5 `resume.after_unload`: the peer's close with `code` leaves the
  /// participant lost (the core knows what the connection offered in its hello).
  func closeLeavesLost(_ conn: ServerConnection, peerCode code: UInt16) -> Bool {
    core.closeLeavesLost(inputs.connectionID(local: conn.id.raw), peerCode: code)
  }

  /// The socket is gone. `wasCounted`: it was still an open WebSocket. `coreClean`
  /// is non-nil for a relay socket the core knows: whether it ended cleanly.
  func connectionClosed(_ conn: ServerConnection, wasCounted: Bool, coreClean: Bool?) {
    guard connections.removeValue(forKey: conn.id) != nil else { return }
    if wasCounted { webSocketLeft(conn) }
    metrics.connectionsOpen.record(connections.count)
    heartbeats.closed(conn.heartbeat)
    if let coreClean { inputs.closed(conn.id, clean: coreClean) }
    if draining, stopped, connections.isEmpty {
      sweepTimer?.close()
      sweepTimer = nil
    }
  }

  func closeHandshakeStarted(_ conn: ServerConnection) {
    closeDeadlines.add(conn.id.raw, dueMs: now.monoMs + config.closeHandshakeTimeoutMs)
  }

  func slowConsumerCounted(_ conn: ServerConnection) {
    metrics.slowConsumerCloses.increment()
    logger.debug("slow consumer", metadata: ["connection": "\(conn.id)"])
  }

  /// A slow consumer's close frame follows what is in flight; the sweep ends it.
  func slowConsumerFlushing(_ conn: ServerConnection) {
    let nowMs = now.monoMs
    outbound.flushing(.init(
      id: conn.id, dueMs: nowMs + config.slowConsumerCloseTimeoutMs, queued: conn.transport.queuedBytes,
      progressMs: nowMs))
  }

  /// After every write: the process-wide outbound budget (protocol/ §1).
  @inline(__always) func checkOutboundBudget() {
    if loop.stats.queuedBytes > config.outboundBudgetBytes { enforceOutboundBudget() }
  }

  // MARK: HTTP responses

  func respond(_ conn: ServerConnection, status: Int, headers: [(String, String)] = [], body: [UInt8]) {
    conn.respond(status: status, headers: headers, body: body)
  }

  func respondJSON(_ conn: ServerConnection, status: Int, _ json: [UInt8]) {
    respond(conn, status: status, headers: [("Content-Type", "application/json")], body: json)
  }

  // MARK: Core effects

  /// Applies everything the core produced; the input log re-arms the core's deadline.
  func applyEffects() {
    perform(core.takeEffects())
    inputs.effectsApplied()
  }

  /// Performs effects for the sockets of this process (others' ids are not in the
  /// table), and the webhooks and pushes it was given (a replicated log gives only
  /// this node's share, `Applied.localEffects`).
  func perform(_ effects: [Effect]) {
    for effect in effects {
      switch effect {
      case .send(let payload, let to):
        deliver(payload, to: to)
      case .close(let id, let code, let reason):
        connections[id]?.close(code: code, reason: reason)
      case .webhook(let event, let body):
        webhook(event: event, body: body)
      case .push(let job):
        performPush(job)
      }
    }
    enforceOutboundBudget()
  }

  func sendPing(_ conn: ServerConnection) {
    if conn.acceptsFrames { conn.sendControl(pingFrame) }
  }

  /// The fan-out: one frame, queued by reference to every recipient. The outbound
  /// budget is checked against a running headroom instead of per write.
  func deliver(_ payload: Payload, to ids: [ConnectionID]) {
    if ids.count == 1 {
      if let conn = connections[ids[0]], conn.acceptsFrames {
        conn.send(Framing.textFrame(payload))
        conn.transport.flushFirst()  // a reply waits behind no fan-out (Loop.flushBudgetNs)
      }
      return
    }
    let frame = Framing.textFrame(payload)
    let budget = config.outboundBudgetBytes
    var headroom = budget > 0 ? budget - loop.stats.queuedBytes : .max
    for id in ids {
      guard let found = connections.unretained(id) else { continue }
      // The table keeps every connection alive for the whole loop, and a socket
      // reports its close only later (ServerConnection.swift): no retain needed.
      let sent = found._withUnsafeGuaranteedRef { conn -> Bool in
        guard conn.acceptsFrames else { return false }
        conn.enqueue(frame)
        return true
      }
      guard sent else { continue }
      headroom -= frame.count
      if headroom < 0 {
        enforceOutboundBudget()
        headroom = budget - loop.stats.queuedBytes
      }
    }
  }

  /// Contract §11: hands the event to the non-blocking webhook client (Webhook.swift);
  /// without `--webhook-url` it is dropped.
  func webhook(event: String, body: Payload) {
    webhookClient?.enqueue(event: event, body: body)
  }

  // MARK: Sweeps and drain

  private func sweep() { sweep(nowMs: now.monoMs) }

  /// The slow deadlines, due at `nowMs` (tests pass a time of their choosing).
  func sweep(nowMs: Int64) {
    sweepTLS(nowMs: nowMs)
    for raw in headDeadlines.popDue(nowMs: nowMs) {
      // protocol/ §1: a request head (and body) not complete in time.
      guard let conn = connections[ConnectionID(raw)], conn.isReadingRequest else { continue }
      if conn.hasKeptRead {
        // The relay's wait, not the client's: a fresh deadline (never before one already listed).
        headDeadlines.add(raw, dueMs: max(nowMs, Int64(loop.nowMs)) + config.headTimeoutMs)
      } else {
        conn.abort()
      }
    }
    for raw in closeDeadlines.popDue(nowMs: nowMs) {
      connections[ConnectionID(raw)]?.abort()
    }
    outboundSweep(nowMs: nowMs)
    if draining, nowMs - drainStartedMs >= config.drainTimeoutMs { finishDrain(force: true) }
  }

  /// Contract §12: readiness and new upgrades answer 503, every WebSocket is closed
  /// with 1001, and the process exits once they are gone or the drain timeout ends.
  public func beginDrain() {
    guard !draining else { return }
    draining = true
    drainStartedMs = now.monoMs
    logger.info("draining", metadata: ["websockets": "\(connections.values.filter(\.isWebSocket).count)"])
    closeAllWebSockets(code: CloseCode.goingAway, reason: "server going away")
    finishDrainIfDone()
  }

  private func finishDrainIfDone() {
    if websocketCount == 0 { finishDrain(force: false) }
  }

  /// Stops accepting and lets the loop end with the last connection. Connections
  /// still flushing a response or a close reply keep their bounded shutdown; the
  /// sweep keeps running so the drain timeout can still force them (contract §12:
  /// exit within `--drain-timeout`).
  private func finishDrain(force: Bool) {
    if !stopped {
      stopped = true
      logger.info("stopped accepting", metadata: ["forced": "\(force)"])
      listener?.close()
      listener = nil
      listenFallback?.close()
      listenFallback = nil
      stopHeartbeats()
      closeDeferredReads()
      webhookClient?.close()  // contract §11: a pending webhook never holds the exit
      pushService?.close()  // nor a pending push
      inputs.stop(force: force)  // a data dir's log itself is closed after the loop (run)
      for s in signals { s.close() }
      signals = []
    }
    for conn in connections.values.sorted(by: { $0.id < $1.id }) {
      switch conn.state {
      case .head, .body, .open, .closing: conn.abort()
      case .responding, .ending: if force { conn.abort() }
      case .closed: break
      }
    }
    if force || connections.isEmpty {
      sweepTimer?.close()
      sweepTimer = nil
    }
  }
}

/// Unguessable identifiers from OpenSSL's RNG (contract §6: ≥ 122 random bits).
final class CryptoIdentifiers: IdentifierSource {
  private let pool = Crypto.RandomPool()
  func token(byteCount: Int) -> String { pool.token(byteCount: byteCount) }
}

let SIGTERM_NUMBER: Int32 = 15
let SIGINT_NUMBER: Int32 = 2
let SIGHUP_NUMBER: Int32 = 1
