// One bot's transport: TCP connect, the opening handshake, WebSocket framing
// through RelayWebSocket's sans-I/O codec, and the ways a bot can go away
// (clean close, TCP reset, silently stop reading). It knows nothing of the
// relay protocol; the bot above it sees open / text / closed.

import EventLoop
import RelayCrypto
import RelayWebSocket

/// How a connection ended, as the bot above needs it.
struct ConnectionEnd {
  /// The WebSocket close code, nil when TCP ended without a close handshake.
  var code: UInt16?
  var reason: String
  var initiatedByPeer: Bool
}

final class BotConnection {
  private let loop: Loop
  private let stats: Stats
  private var tcp: TCPConnection?
  private var ws: WebSocketConnection
  /// The opening handshake in progress (RFC 6455 §4.1, RelayWebSocket's
  /// `WebSocketClientHandshake`): our key, the offered subprotocols and the
  /// response bytes until its head is complete.
  private var handshake: (key: String, offered: [String], received: [UInt8])?
  /// `wss://`: the TLS layer under the WebSocket codec (its socket's sealer).
  private var tls: TLSConnection?
  private var ended = false
  private var upgraded = false
  /// Inside `ws.receive`: the codec is being mutated, so sends wait in
  /// `deferred` until it returns (see `feed`).
  private var receiving = false
  private var deferred: [Deferred] = []
  /// Loop time of the last read.
  private var lastReadMs: UInt64 = 0
  /// A silence longer than this is a stall: the relay pings every heartbeat
  /// interval (§5); the bot sets twice that.
  var stallMs: UInt64 = 20_000
  /// Where the latest stall began.
  private var stalledSinceMs: UInt64?

  /// Since when the relay may have stopped serving this connection, so that
  /// its user's grace (§5) may run from then: the start of the latest stall
  /// (a paused node, which sends what it had queued once it wakes up), else
  /// the last read.
  func quietSince(nowMs: UInt64) -> UInt64 {
    stalledSinceMs ?? (lastReadMs != 0 ? lastReadMs : nowMs)
  }

  private enum Deferred {
    case text([UInt8])
    case close(UInt16)
  }

  /// Called once the 101 is verified.
  var onOpen: (() -> Void)?
  /// One complete text message, borrowed: the bytes are valid only during
  /// the call. `receivedNs` is when the read that carried it returned.
  var onText: ((_ bytes: UnsafeRawBufferPointer, _ receivedNs: UInt64) -> Void)?
  /// Called exactly once, unless `abandon()` was called first.
  var onEnd: ((ConnectionEnd) -> Void)?

  init(loop: Loop, stats: Stats, maxMessageBytes: Int) {
    self.loop = loop
    self.stats = stats
    // §10.3 wants unpredictable masking keys: seed the codec from the CSPRNG.
    let seed = Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
    ws = WebSocketConnection(role: .client, maxMessageBytes: maxMessageBytes, maskSeed: seed)
  }

  func open(url: WebSocketURL, path: String, subprotocol: String?, source index: Int, tls context: TLSContext? = nil) {
    if url.secure, let context { tls = TLSConnection(context: context, serverName: url.serverName, isServer: false) }
    let offered = subprotocol.map { [$0] } ?? []
    let (request, key) = WebSocketClientHandshake.request(
      host: "\(url.host):\(url.port)", target: path, key: Crypto.randomBytes(16), subprotocols: offered)
    handshake = (key, offered, [])
    stats.connectsStarted += 1
    TCPConnector.connect(loop: loop, host: url.host, port: url.port, source: url.source(forBot: index)) {
      [weak self] result in
      guard let self else {
        if case .success(let c) = result { c.close() }
        return
      }
      switch result {
      case .success(let c): self.attach(c, request: request)
      case .failure(let e):
        self.stats.connectFailures += 1
        self.finish(ConnectionEnd(code: nil, reason: "connect failed: \(e)", initiatedByPeer: true))
      }
    }
  }

  private func attach(_ c: TCPConnection, request: [UInt8]) {
    guard !ended else { c.close(); return }
    tcp = c
    stats.openSockets += 1
    if let tls {
      c.sealer = tls
      c.onRead = { [weak self] bytes in self?.receivedTLS(bytes) }
    } else {
      c.onRead = { [weak self] bytes in self?.received(bytes) }
    }
    // `stats` is captured strongly: the socket may outlive this object while
    // the server finishes closing it, and must still be counted as closed.
    c.onClose = { [weak self, stats] reason in
      stats.openSockets -= 1
      self?.finish(ConnectionEnd(code: nil, reason: "tcp closed: \(reason)", initiatedByPeer: true))
    }
    c.startReading()
    _ = c.write(request)
  }

  /// Ciphertext in: the plaintext goes the same way as a plain socket's reads.
  private func receivedTLS(_ bytes: UnsafeRawBufferPointer) {
    guard let tls, let tcp else { return }
    tls.receive(bytes) { [unowned self] plaintext in self.received(UnsafeRawBufferPointer(plaintext)) }
    if tls.hasOutput { tcp.flushSoon() }
    if case .failed(let e) = tls.state, !ended {
      stats.connectFailures += 1
      finish(ConnectionEnd(code: nil, reason: "tls: \(e)", initiatedByPeer: true))
      tcp.close()
    }
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    stats.reads += 1
    let now = loop.nowMs
    if lastReadMs != 0, now - lastReadMs > stallMs { stalledSinceMs = lastReadMs }
    lastReadMs = now
    guard !ended else { return }
    guard handshake != nil else { feed(bytes); return }
    handshake!.received.append(contentsOf: bytes)
    let hs = handshake!
    switch WebSocketClientHandshake.evaluateResponse(
      hs.received, key: hs.key, offeredSubprotocols: hs.offered, sha1: { Crypto.sha1($0) })
    {
    case .needMore: return
    case .refused(let status, let why):
      stats.connectFailures += 1
      finish(ConnectionEnd(code: nil, reason: "upgrade refused (\(status)): \(why)", initiatedByPeer: true))
      tcp?.close()
    case .accepted(_, let rest):
      handshake = nil
      upgraded = true
      stats.connected += 1
      onOpen?()
      if !rest.isEmpty, !ended { rest.withUnsafeBytes { feed($0) } }
    }
  }

  /// Messages are handled while the codec parses, straight from the read
  /// buffer (no copy, no allocation per message). Handling one may send (a
  /// publisher's next message), and sending mutates the codec, which Swift's
  /// exclusivity rules forbid during `receive`: sends made meanwhile are
  /// queued and go out, in order, once it returns. Other codec events are
  /// rare (pings, close) and are handled after it returns, in order.
  private func feed(_ bytes: UnsafeRawBufferPointer) {
    var events: [WebSocketEvent] = []
    // One stamp per read: every frame of it reached us at the same moment,
    // and a clock read per frame was a measurable share of the bots' CPU.
    let now = Loop.hrtimeNs()
    // Read once per read, not per message (each read retains the closure).
    // Nothing that runs from `onText` replaces it; `ended` and a detach
    // (which clears it) are still honoured per message.
    let deliver = onText
    var frames = 0
    receiving = true
    ws.receive(
      bytes,
      onMessage: { opcode, payload in
        frames += 1
        guard !ended, onText != nil, opcode == .text else { return }
        deliver?(payload, now)
      },
      emit: { events.append($0) })
    stats.framesReceived += frames
    receiving = false
    for event in events where !ended { handle(event) }
    if !deferred.isEmpty { flushDeferred() }
  }

  private func flushDeferred() {
    let queued = deferred
    deferred.removeAll()
    for d in queued {
      switch d {
      case .text(let payload): sendText(payload)
      case .close(let code): close(code: code)
      }
    }
  }

  private func handle(_ event: WebSocketEvent) {
    switch event {
    case .text, .binary: break  // delivered through onMessage
    case .write(let out): _ = tcp?.write(out)
    case .ping: stats.pingsReceived += 1
    case .closed(let code, let reason, let byPeer):
      // The handshake is over (the codec already emitted our reply if the
      // server began it). RFC 6455 §7.1.1: the server closes TCP first, so
      // TIME_WAIT lands on its side. Closing here would leave one on ours,
      // holding an ephemeral port for 60 s: big runs then starve connect().
      finish(ConnectionEnd(code: code, reason: reason, initiatedByPeer: byPeer))
    case .pong: stats.framesReceived += 1
    }
  }

  /// Sends one text message (masked, as RFC 6455 §5.3 requires of clients).
  func sendText(_ payload: [UInt8]) {
    guard upgraded, !ended, let tcp else { return }
    if receiving { deferred.append(.text(payload)); return }
    _ = tcp.write(ws.encode(.text, payload))
  }

  /// Starts the closing handshake; `onEnd` fires when the server answers.
  func close(code: UInt16 = 1000) {
    guard upgraded, !ended, let tcp else { abandon(); return }
    if receiving { deferred.append(.close(code)); return }
    _ = tcp.write(ws.close(code: code, reason: ""))
  }

  /// Stops reading and answering pings: to the server the client vanished.
  func goSilent() { tcp?.stopReading() }

  /// Forgets the callbacks but keeps the socket as it is (a silent
  /// connection a resume is about to replace).
  func detach() {
    onEnd = nil
    onText = nil
    onOpen = nil
  }

  /// Drops the connection without a close frame (TCP RST) and without
  /// reporting back: the bot already knows.
  func abandon() {
    if !ended, upgraded { stats.connected -= 1 }
    ended = true
    onEnd = nil
    onText = nil
    tcp?.reset()
    tcp = nil
  }

  private func finish(_ end: ConnectionEnd) {
    guard !ended else { return }
    ended = true
    if upgraded { stats.connected -= 1 }
    let callback = onEnd
    onEnd = nil
    onText = nil
    callback?(end)
  }
}
