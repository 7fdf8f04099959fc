import EventLoop
import RelayCluster
public import Logging
import RelayCore
public import RelayProtocol
import RelayCrypto
import RelayWebSocket

/// The I/O shell: owns the loop, the listener and every connection, feeds the
/// pure core, and turns its effects into writes. Single-threaded by design: all of
/// it runs on one libuv loop (DESIGN.md, "libuv and Swift 6 rules").
public final class RelayServer {
  public let config: ServerConfig
  let logger: Logger
  let loop: Loop
  /// The relay's state machine; in cluster mode, this node's replica's core (a new
  /// one when the cluster's state is reset).
  var core: RelayCore
  let verifyToken: (String, Int64) -> Identity?
  /// Cluster mode (contract §12): the bus and the replica; nil standalone.
  var cluster: ClusterNode?
  var replica: Replica?
  /// Cluster mode: each socket's last inbound frame (loop ms), for the shell's
  /// heartbeats (§5), and the admin requests waiting for their log entry.
  var clusterLastInbound: [UInt64: UInt64] = [:]
  var lastClusterPingMs: UInt64 = 0
  var pendingAdmin: [UInt64: ServerConnection] = [:]
  var nextAdminRequest: UInt64 = 1
  let metrics = ServerMetrics()
  private var listener: TCPListener?
  var connections = RefTable<ServerConnectionsById>()
  var nextConnection: UInt64 = 1
  private var headDeadlines = FIFODeadlines()
  /// TLS (`--tls-cert`): the context new connections get, their handshake deadlines.
  var tlsContext: TLSContext?
  var tlsDeadlines = FIFODeadlines()
  var tlsStats = TLSStats()
  private var closeDeadlines = FIFODeadlines()
  /// One timer for the core's next deadline, one slow sweep for the FIFO deadlines.
  private var coreTimer: EventLoop.Timer?
  private var armedCoreDeadline: Int64?
  private var sweepTimer: EventLoop.Timer?
  private var signals: [SignalWatcher] = []
  /// Cluster mode: the listener is bound at start but listens once the node is ready.
  private var listening = false
  private var listenFallback: EventLoop.Timer?
  /// Reused for the events of each WebSocket read, so a read allocates no array.
  private var eventScratch: [WebSocketEvent] = []
  private(set) var draining = false
  private var websocketCount = 0
  /// The heartbeat ping (empty payload), framed once and shared by every connection.
  private let pingFrame = Framing.frame(.ping, [])
  private var stopped = false
  private var drainStartedMs: Int64 = 0
  /// `--webhook-url` deliveries (contract §11); nil when not configured.
  var webhookClient: WebhookClient?
  /// Slow-consumer closes, the process-wide outbound budget, heap trimming.
  let outbound = OutboundBudget()

  public init(config: ServerConfig, logger: Logger, verifyToken: @escaping (String, Int64) -> Identity?) {
    self.config = config
    self.logger = logger
    self.loop = Loop()
    var coreConfig = config.core
    coreConfig.sessionWebhooks = config.webhookURL != nil
    self.verifyToken = verifyToken
    self.core = RelayCore(config: coreConfig, ids: CryptoIdentifiers(), verifyToken: verifyToken)
    if let c = config.cluster {
      cluster = ClusterNode(server: self, address: c.redis, name: c.nodeId, nodeTimeoutMs: c.nodeTimeoutMs, logger: logger)
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
      try loadTLS()
      l = try TCPListener(loop: loop, host: config.host, port: config.port)
      // A cluster node listens once it has joined and caught up with the log, so a
      // client that waits for /healthz never meets a node that would refuse its
      // upgrade; after `clusterListenGraceMs` it listens anyway (Redis may be down:
      // then /readyz says 503 while /healthz answers, contract §12).
      if cluster == nil { try l.listen { [unowned self] tcp in self.accept(tcp) } }
    } catch {
      loop.close()  // nothing else was created yet; every handle is closed before the loop goes
      throw error
    }
    listener = l
    boundPort = l.port
    webhookClient = makeWebhookClient()
    coreTimer = EventLoop.Timer(loop: loop)
    let sweep = EventLoop.Timer(loop: loop)
    sweep.start(afterMs: 250, repeatMs: 250) { [unowned self] in self.sweep() }
    sweepTimer = sweep
    if let cluster {
      cluster.onReady = { [unowned self] in self.listenOnce() }
      cluster.start()
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
    loop.close()
  }

  // MARK: Time

  /// The instant of an input: the loop's monotonic time orders deadlines; the wall
  /// clock is read fresh (a vDSO call) so `ts`, `sentAt` and JWT checks agree with
  /// the clients' clocks to the millisecond. The core keeps `raisedAt` monotonic
  /// itself should the wall clock step back.
  var now: Instant {
    let mono = Int64(loop.nowMs)
    return Instant(monoMs: mono, wallMs: Loop.wallClockMs())
  }

  // MARK: Accept and read

  private func accept(_ tcp: TCPConnection) {
    let id = makeConnectionID()
    let conn = ServerConnection(
      server: self, id: id, tcp: tcp, maxHeadBytes: config.maxHeadBytes,
      maxMessageBytes: config.maxMessageBytes)
    connections.insert(conn)
    tcp.maxOutboundBytes = config.maxOutboundBytes
    tcp.delegate = conn
    headDeadlines.add(id.raw, dueMs: now.monoMs + config.headTimeoutMs)
    startTLS(conn)
    metrics.connectionsAccepted.increment()
    metrics.connectionsOpen.record(connections.count)
    tcp.startReading()
  }

  /// Never called after `didClose`: the socket drops its delegate when it closes.
  func didRead(_ conn: ServerConnection, _ bytes: UnsafeMutableRawBufferPointer) {
    switch conn.phase {
    case .http(var parser):
      conn.phase = .finishing  // parser moved out so it is mutated uniquely
      let result = parser.feed(UnsafeRawBufferPointer(bytes))
      conn.phase = .http(parser)
      handleHead(conn, result, leftover: parser.leftover)
    case .body(let head, var body, let expected):
      body.append(contentsOf: bytes)
      conn.phase = .body(head, body, expected: expected)
      if body.count >= expected { routeHTTP(conn, head, body: Array(body.prefix(expected))) }
    case .websocket:
      feedWebSocket(conn, bytes)
    case .finishing:
      break  // a response is on its way out; later input is discarded
    }
  }

  func didClose(_ conn: ServerConnection, _ reason: CloseReason) {
    let id = conn.id
    guard connections.removeValue(forKey: id) != nil else { return }
    leaveWebSocket(conn)
    metrics.connectionsOpen.record(connections.count)
    if conn.coreOpened {
      conn.coreOpened = false
      inputClosed(conn)
    }
    if draining, stopped, connections.isEmpty {
      sweepTimer?.close()
      sweepTimer = nil
    }
  }

  // MARK: HTTP

  private func handleHead(_ conn: ServerConnection, _ result: HTTPHeadParseResult, leftover: [UInt8]) {
    switch result {
    case .needMore:
      return
    case .invalid(let status):
      respond(conn, status: status, body: Array(HTTPResponse.reasonPhrase(status).utf8))
    case .complete(let head, _):
      metrics.httpRequests.increment()
      // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is a 400.
      if head.versionMinor >= 1, head.headerCount("host") != 1 {
        respond(conn, status: 400, body: Array("missing or repeated Host".utf8))
        return
      }
      if isUpgrade(head) {
        upgrade(conn, head, leftover: leftover)
        return
      }
      let length = head.contentLength ?? -1
      guard length >= 0, length <= config.maxBodyBytes else {
        respond(conn, status: length < 0 ? 400 : 413, body: Array("bad body length".utf8))
        return
      }
      if leftover.count >= length {
        routeHTTP(conn, head, body: Array(leftover.prefix(length)))
      } else {
        conn.phase = .body(head, leftover, expected: length)
      }
    }
  }

  private func isUpgrade(_ head: HTTPRequestHead) -> Bool {
    head.path == "/v1/ws" || (config.echo && head.path == "/v1/echo")
  }

  /// Writes a complete HTTP response and closes the connection after it is sent
  /// (no keep-alive: the HTTP side is for health checks and admin calls).
  func respond(_ conn: ServerConnection, status: Int, headers: [(String, String)] = [], body: [UInt8]) {
    conn.phase = .finishing
    let bytes = HTTPResponse.make(status: status, headers: headers, body: body, close: true)
    conn.tcp.write(bytes)
    conn.tcp.shutdown()
  }

  func respondJSON(_ conn: ServerConnection, status: Int, _ json: [UInt8]) {
    respond(conn, status: status, headers: [("Content-Type", "application/json")], body: json)
  }

  // MARK: WebSocket

  private func upgrade(_ conn: ServerConnection, _ head: HTTPRequestHead, leftover: [UInt8]) {
    if !isReady {
      respond(conn, status: 503, body: Array((draining ? "draining" : "cluster unavailable").utf8))
      return
    }
    if let cluster, Replica.node(of: conn.id.raw) != cluster.number {
      // Accepted under a node number this node no longer has (it rejoined).
      respond(conn, status: 503, body: Array("node rejoining the cluster".utf8))
      return
    }
    let endpoint: Endpoint = head.path == "/v1/echo" ? .echo : .relay
    let result = WebSocketHandshake.evaluate(
      head, supportedSubprotocols: endpoint == .relay ? ["relay.v1"] : [],
      refuseUnsupportedOffer: endpoint == .relay, sha1: Crypto.sha1)
    switch result {
    case .reject(_, let response):
      conn.phase = .finishing
      conn.tcp.write(response)
      conn.tcp.shutdown()
    case .accept(let response, _):
      conn.tcp.write(response)
      conn.phase = .websocket(endpoint)
      conn.countedAsWebSocket = true
      websocketCount += 1
      metrics.websocketsOpen.record(websocketCount)
      if endpoint == .relay {
        conn.coreOpened = true
        inputOpen(conn)
      }
      if !leftover.isEmpty {
        var bytes = leftover
        bytes.withUnsafeMutableBytes { feedWebSocket(conn, $0) }
      }
    }
  }

  /// Decodes a read (unmasking in place in the read buffer) and handles its events
  /// after the codec is done, since handling one may start a close on the codec.
  /// The connection stays in the table throughout: a socket reports its close only
  /// from libuv's close callback, never inside the writes and closes made here.
  private func feedWebSocket(_ conn: ServerConnection, _ bytes: UnsafeMutableRawBufferPointer) {
    guard case .websocket(let endpoint) = conn.phase else { return }
    var events = eventScratch
    eventScratch = []
    conn.ws.receive(overwriting: bytes) { events.append($0) }
    for event in events { handle(event, conn, endpoint) }
    events.removeAll(keepingCapacity: true)
    eventScratch = events
  }

  private func handle(_ event: WebSocketEvent, _ conn: ServerConnection, _ endpoint: Endpoint) {
    switch event {
    case .write(let bytes):
      send(conn, bytes)
    case .text(let payload):
      if endpoint == .echo {
        if conn.acceptsFrames { send(conn, Framing.frame(.text, payload)) }
      } else {
        inputText(conn, payload)
      }
    case .binary(let payload):
      if endpoint == .echo {
        if conn.acceptsFrames { send(conn, Framing.frame(.binary, payload)) }
      } else {
        // Contract §1: a binary message on /v1/ws closes with 1003.
        closeWebSocket(conn, code: CloseCode.unsupportedData, reason: "binary messages are not accepted")
      }
    case .ping, .pong:
      if endpoint == .relay, conn.coreOpened { inputAlive(conn) }
    case .closed(_, _, _):
      conn.closedCleanly = true
      conn.phase = .finishing
      conn.tcp.shutdown()
      leaveWebSocket(conn)
    }
  }

  /// Counts a WebSocket out of the open ones exactly once: when its closing
  /// handshake completes, when it is dropped as a slow consumer, or when its socket
  /// ends. Drain completion and the open-WebSockets gauge read this count.
  private func leaveWebSocket(_ conn: ServerConnection) {
    guard conn.countedAsWebSocket else { return }
    conn.countedAsWebSocket = false
    websocketCount -= 1
    metrics.websocketsOpen.record(websocketCount)
    if draining, !stopped, websocketCount == 0 { finishDrain(force: false) }
  }

  /// Starts a close we initiate: close frame now, TCP closed when the peer answers
  /// or after `closeHandshakeTimeoutMs`.
  func closeWebSocket(_ conn: ServerConnection, code: UInt16, reason: String) {
    guard case .websocket = conn.phase else { return }
    let frame = conn.ws.close(code: code, reason: reason)
    conn.closedCleanly = true
    if !frame.isEmpty { send(conn, frame) }
    closeDeadlines.add(conn.id.raw, dueMs: now.monoMs + config.closeHandshakeTimeoutMs)
  }

  private func send(_ conn: ServerConnection, _ bytes: [UInt8]) {
    if !conn.tcp.write(bytes) { slowConsumer(conn) }
    if loop.stats.queuedBytes > config.outboundBudgetBytes { enforceOutboundBudget() }
  }

  private func send(_ conn: ServerConnection, _ buffer: OutboundBuffer) {
    if !conn.tcp.write(buffer) { slowConsumer(conn) }
    if loop.stats.queuedBytes > config.outboundBudgetBytes { enforceOutboundBudget() }
  }

  /// Contract §1: over `--max-outbound-bytes` not taken by the kernel (or chosen by
  /// the process-wide budget) → close 4008 and free the queue. Whole frames the kernel
  /// has not started on are dropped at once; the close frame follows the bytes in
  /// flight (at most `Loop.maxInFlightBytes` and the frame begun), so a reader that is
  /// slow but reading gets it (OutboundBudget.swift ends the socket once it is
  /// flushed). The participant is lost, not gone: 4008 means "resume" (§14).
  /// A write refused because the connection is already ending is not counted again.
  func slowConsumer(_ conn: ServerConnection) {
    guard conn.tcp.acceptsWrites else { return }
    if case .finishing = conn.phase { return }
    metrics.slowConsumerCloses.increment()
    logger.debug("slow consumer", metadata: ["connection": "\(conn.id)"])
    conn.tcp.discardUnsent()
    guard case .websocket = conn.phase, conn.ws.state == .open else {
      conn.tcp.close()
      return
    }
    let frame = conn.ws.close(code: CloseCode.slowConsumer, reason: "slow consumer")
    conn.phase = .finishing
    conn.tcp.writeFinal(frame)
    outbound.flushing(.init(
      id: conn.id, dueMs: now.monoMs + config.slowConsumerCloseTimeoutMs, queued: conn.tcp.queuedBytes,
      progressMs: now.monoMs))
    leaveWebSocket(conn)
  }

  // MARK: Core effects

  /// Applies everything the core produced, then re-arms the core timer.
  func applyEffects() {
    perform(core.takeEffects(), webhooks: true)
    armCoreTimer()
  }

  /// Performs effects for the sockets of this process (others' ids are not in the
  /// table); `webhooks`: clustered, only the node that logged an entry POSTs them.
  func perform(_ effects: [Effect], webhooks: Bool) {
    for effect in effects {
      switch effect {
      case .send(let payload, let to):
        deliver(payload, to: to)
      case .ping(let id):
        if let conn = connections[id] { sendPing(conn) }
      case .close(let id, let code, let reason):
        if let conn = connections[id] { closeWebSocket(conn, code: code, reason: reason) }
      case .drop(let id):
        // Contract §5 heartbeat timeout: the peer is presumed dead, no close handshake.
        if let conn = connections[id] {
          conn.closedCleanly = false
          conn.tcp.close()
        }
      case .webhook(let event, let body):
        if webhooks { webhook(event: event, body: body) }
      }
    }
    enforceOutboundBudget()
  }

  func sendPing(_ conn: ServerConnection) {
    if conn.acceptsFrames { send(conn, pingFrame) }
  }

  func deliver(_ payload: Payload, to ids: [ConnectionID]) {
    if ids.count == 1 {
      if let conn = connections[ids[0]], conn.acceptsFrames { send(conn, Framing.textFrame(payload)) }
      return
    }
    let frame = Framing.textFrame(payload)
    for id in ids {
      if let conn = connections[id], conn.acceptsFrames { send(conn, frame) }
    }
  }

  /// Contract §11: hands the event to the non-blocking webhook client (Webhook.swift);
  /// without `--webhook-url` it is dropped.
  func webhook(event: String, body: Payload) {
    webhookClient?.enqueue(event: event, body: body)
  }

  private func armCoreTimer() {
    guard cluster == nil, let timer = coreTimer else { return }
    let next = core.nextDeadline
    if next == armedCoreDeadline { return }
    armedCoreDeadline = next
    guard let next else {
      timer.stop()
      return
    }
    let delay = max(0, next - Int64(loop.nowMs))
    timer.start(afterMs: UInt64(delay)) { [unowned self] in
      self.armedCoreDeadline = nil
      self.core.tick(at: self.now)
      self.applyEffects()
    }
  }

  // MARK: Sweeps and drain

  private func sweep() {
    let nowMs = now.monoMs
    sweepTLS(nowMs: nowMs)
    for raw in headDeadlines.popDue(nowMs: nowMs) {
      guard let conn = connections[ConnectionID(raw)] else { continue }
      switch conn.phase {
      case .http, .body: conn.tcp.close()  // contract §1: head not complete in time
      default: break
      }
    }
    for raw in closeDeadlines.popDue(nowMs: nowMs) {
      connections[ConnectionID(raw)]?.tcp.close()
    }
    outboundSweep(nowMs: nowMs)
    if draining, nowMs - drainStartedMs >= config.drainTimeoutMs { finishDrain(force: true) }
    clusterHeartbeats()
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
      coreTimer?.close()
      coreTimer = nil
      webhookClient?.close()  // contract §11: a pending webhook never holds the exit
      if force { cluster?.close() } else { cluster?.leave {} }
      for s in signals { s.close() }
      signals = []
    }
    for conn in connections.values.sorted(by: { $0.id < $1.id }) {
      switch conn.phase {
      case .http, .body, .websocket: conn.tcp.close()
      case .finishing: if force { conn.tcp.close() }
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
  func token(byteCount: Int) -> String { Crypto.randomToken(byteCount: byteCount) }
}

let SIGTERM_NUMBER: Int32 = 15
let SIGINT_NUMBER: Int32 = 2
let SIGHUP_NUMBER: Int32 = 1
