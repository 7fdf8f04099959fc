// The Linux transport: the project's own EventLoop and RelayWebSocket codec on a
// thread of the client's own (DESIGN.md, "libuv and Swift 6 rules": one loop, one
// thread; only `uv_async_send` crosses threads, with a locked mailbox beside it).

#if canImport(EventLoop)
  import EventLoop
  import Foundation
  #if canImport(Glibc)
    import Glibc
  #endif
  import RelayClientCore
  import RelayCrypto
  import RelayWebSocket

  /// The app-side handle of the loop thread: posts inputs, wakes the loop.
  /// `@unchecked Sendable`: `inbox` and `sender` are only touched under `lock`.
  final class LoopThread: @unchecked Sendable {
    private let lock = NSLock()
    private var inbox: [RunnerInput] = []
    private var sender: AsyncWakeupSender?

    /// Starts the thread; `makeRunner` runs on it.
    init(endpoint: WebSocketEndpoint, makeRunner: @escaping @Sendable () -> ClientRunner) {
      let thread = Thread { [self] in self.run(endpoint: endpoint, runner: makeRunner()) }
      thread.name = "RelayClient I/O"
      thread.start()
    }

    /// Queues `input` for the loop thread. Safe from any thread.
    func post(_ input: RunnerInput) {
      lock.lock()
      inbox.append(input)
      let wake = sender
      lock.unlock()
      wake?.send()
    }

    private func takeInbox() -> [RunnerInput] {
      lock.lock()
      defer { lock.unlock() }
      let taken = inbox
      inbox = []
      return taken
    }

    private func run(endpoint: WebSocketEndpoint, runner: ClientRunner) {
      let loop = Loop()
      let wire = LoopWire(loop: loop, endpoint: endpoint, runner: runner)
      runner.wire = wire
      var wakeup: AsyncWakeup?
      let drain = { [self] in
        for input in self.takeInbox() {
          loop.updateTime()
          runner.handle(input)
          if case .shutdown = input {
            wire.shutdown()
            wakeup?.close()
            return
          }
        }
      }
      wakeup = AsyncWakeup(loop: loop, drain)
      lock.lock()
      sender = wakeup?.sender
      lock.unlock()
      drain()  // inputs posted before the sender existed
      loop.run()
      loop.close()
    }
  }

  /// Host, port and path of a `ws://` or `wss://` URL; host names are resolved when
  /// each attempt starts. `wss://` verifies the relay's certificate against the
  /// system's trust store (OpenSSL's default paths; `SSL_CERT_FILE` overrides them).
  struct WebSocketEndpoint: Sendable {
    var host: String
    var port: Int
    var path: String
    var secure: Bool

    init?(_ url: URL) {
      guard url.scheme == "ws" || url.scheme == "wss", let host = url.host, !host.isEmpty else { return nil }
      self.host = host
      secure = url.scheme == "wss"
      port = url.port ?? (secure ? 443 : 80)
      path = url.path.isEmpty ? "/v1/ws" : url.path
    }
  }

  /// The socket side on the loop thread: TCP connect, the RFC 6455 §4.1 client
  /// handshake (`WebSocketClientHandshake`), then framing by `WebSocketConnection`.
  final class LoopWire: WireTransport {
    private let loop: Loop
    private let endpoint: WebSocketEndpoint
    private unowned let runner: ClientRunner
    private let timer: EventLoop.Timer
    /// Bumped for every new socket: callbacks of an older one are ignored.
    private var generation = 0
    private var tcp: TCPConnection?
    private var codec: WebSocketConnection?
    private var handshake: (key: String, received: [UInt8])?

    init(loop: Loop, endpoint: WebSocketEndpoint, runner: ClientRunner) {
      self.loop = loop
      self.endpoint = endpoint
      self.runner = runner
      timer = EventLoop.Timer(loop: loop)
    }

    var nowMs: Int64 { Int64(loop.nowMs) }

    func open() {
      generation += 1
      let mine = generation
      // Blocks only this client's own thread, once per attempt; a failure is retried
      // like a refused connect.
      guard let address = HostResolver.address(of: endpoint.host) else {
        return ended(mine, code: nil, reason: "cannot resolve \(endpoint.host)")
      }
      TCPConnector.connect(loop: loop, host: address, port: endpoint.port) { [weak self] result in
        guard let self, mine == self.generation else {
          if case .success(let c) = result { c.close() }
          return
        }
        switch result {
        case .success(let c): self.attach(c, generation: mine)
        case .failure(let e): self.ended(mine, code: nil, reason: "connect failed: \(e)")
        }
      }
    }

    private func attach(_ c: TCPConnection, generation mine: Int) {
      tcp = c
      if endpoint.secure {
        guard let context = Self.tlsContext() else {
          c.close()
          return ended(mine, code: nil, reason: "no TLS trust store")
        }
        let tls = TLSConnection(context: context, serverName: endpoint.host, isServer: false)
        c.sealer = tls  // what the wire writes is sealed at flush time
        c.onRead = { [weak self] bytes in self?.readTLS(tls, bytes, generation: mine) }
      } else {
        c.onRead = { [weak self] bytes in self?.read(bytes, generation: mine) }
      }
      c.onClose = { [weak self] reason in self?.ended(mine, code: nil, reason: "tcp closed: \(reason)") }
      c.startReading()
      let request = WebSocketClientHandshake.request(
        host: "\(endpoint.host):\(endpoint.port)", target: endpoint.path, key: Crypto.randomBytes(16),
        subprotocols: ["relay.v1"])
      handshake = (request.key, [])
      _ = c.write(request.bytes)
    }

    /// The client TLS context, made once per process (the trust store is read then).
    private static func tlsContext() -> TLSContext? {
      sharedTLSLock.lock()
      defer { sharedTLSLock.unlock() }
      if sharedTLS == nil { sharedTLS = try? TLSContext(clientWithCA: nil) }
      return sharedTLS
    }

    private func readTLS(_ tls: TLSConnection, _ bytes: UnsafeRawBufferPointer, generation mine: Int) {
      guard mine == generation else { return }
      tls.receive(bytes) { plaintext in self.read(plaintext, generation: mine) }
      if tls.hasOutput { tcp?.flushSoon() }
      if case .failed(let error) = tls.state {
        tcp?.close()
        ended(mine, code: nil, reason: "TLS: \(error)")
      }
    }

    private func read(_ bytes: UnsafeRawBufferPointer, generation mine: Int) {
      guard mine == generation else { return }
      loop.updateTime()
      guard var pending = handshake else { return frames(Array(bytes), generation: mine) }
      pending.received.append(contentsOf: bytes)
      handshake = pending
      switch WebSocketClientHandshake.evaluateResponse(
        pending.received, key: pending.key, offeredSubprotocols: ["relay.v1"], sha1: { Crypto.sha1($0) })
      {
      case .needMore: return
      case .refused(let status, let reason):
        tcp?.close()
        ended(mine, code: nil, reason: "upgrade refused (\(status)): \(reason)")
      case .accepted(_, let leftover):
        handshake = nil
        // RFC 6455 §10.3: masking keys must be unpredictable.
        let seed = Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) }
        codec = WebSocketConnection(role: .client, maxMessageBytes: 16 << 20, maskSeed: seed)
        runner.transportOpened()
        if !leftover.isEmpty, mine == generation { frames(leftover, generation: mine) }
      }
    }

    /// Events are collected while the codec parses and handled after it returns, so
    /// a handler that sends (which mutates the codec) never overlaps the parse.
    private func frames(_ bytes: [UInt8], generation mine: Int) {
      var events: [WebSocketEvent] = []
      codec?.receive(bytes) { events.append($0) }
      for event in events where mine == generation {
        switch event {
        case .text(let text): runner.transportText(text)
        case .binary: break
        case .ping, .pong: runner.transportActivity()
        case .write(let out): _ = tcp?.write(out)
        case .closed(let code, let reason, _):
          tcp?.shutdown()
          ended(mine, code: code, reason: reason)
        }
      }
    }

    private func ended(_ mine: Int, code: UInt16?, reason: String) {
      guard mine == generation else { return }
      generation += 1
      tcp = nil
      codec = nil
      handshake = nil
      loop.updateTime()
      runner.transportClosed(code: code, reason: reason)
    }

    func send(_ text: [UInt8]) {
      guard let tcp, codec != nil else { return }
      _ = tcp.write(codec!.encode(.text, text))
    }

    func close(code: UInt16?) {
      generation += 1
      defer {
        tcp = nil
        codec = nil
        handshake = nil
      }
      guard let tcp else { return }
      if let code, codec != nil {
        _ = tcp.write(codec!.close(code: code, reason: ""))
        tcp.shutdown()
      } else {
        tcp.reset()
      }
    }

    func drop() {
      // Reported like any failed socket: through `onClose`, as a network failure.
      tcp?.reset()
    }

    func armTimer(atMs: Int64?) {
      guard let atMs else { return timer.stop() }
      let delay = max(0, atMs - nowMs)
      timer.start(afterMs: UInt64(delay)) { [weak self] in
        guard let self else { return }
        self.loop.updateTime()
        self.runner.tick()
      }
    }

    /// Closes the timer; the socket was already closed by the machine's `disconnect`.
    func shutdown() {
      timer.close()
      tcp?.close()
    }
  }

  /// The process's client TLS context for `wss://` (LoopTransport.tlsContext()),
  /// made by the first connecting transport under the lock.
  nonisolated(unsafe) private var sharedTLS: TLSContext?
  private let sharedTLSLock = NSLock()
#endif
