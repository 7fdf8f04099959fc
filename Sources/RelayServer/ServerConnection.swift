import EventLoop
import RelayCore
import RelayCrypto
import RelayWebSocket
import RelayPrimitives
import CoreMetrics
import RelayProtocol

/// Which WebSocket endpoint a connection was upgraded on.
enum Endpoint {
  /// `/v1/ws`: relay protocol, every text message goes to the core.
  case relay
  /// `/v1/echo`: plain echo for conformance suites (protocol/ §1).
  case echo
}

/// Where one connection is in its life. One enum, so the facts that used to be
/// flags (is it counted among the open WebSockets, does the core know it, will its
/// end be clean) follow from the state and cannot disagree:
///
/// ```
/// head ─┬─> body ──> responding ──> closed
///       ├─> responding
///       └─> open ─┬─> closing ──> ending(clean) ──> closed
///                 └─> ending(clean | lost) ────────> closed
/// ```
/// `open` and `closing` are counted among the open WebSockets (drain waits for
/// them); a relay socket in `open`, `closing` or `ending` is known to the core,
/// which hears of its end once, when the socket closes.
/// The HTTP states are boxed (`indirect`): they are large and brief, and an
/// upgraded connection should not carry their size for the rest of its life.
enum ConnectionState {
  /// Reading a request head (after the TLS handshake, when there is one).
  indirect case head(HTTPHeadParser)
  /// Reading a request body of `expected` bytes.
  indirect case body(HTTPRequestHead, [UInt8], expected: Int)
  /// Speaking WebSocket.
  case open(Endpoint)
  /// We sent a close frame (RFC 6455 §7.1.2) and wait for the peer's, or for
  /// `--close-timeout`. Its end is clean.
  case closing(Endpoint)
  /// The WebSocket is over (closing handshake done, slow consumer, dead peer) and
  /// the socket is going; `clean` is what the core will be told.
  case ending(Endpoint, clean: Bool)
  /// An HTTP response (or a refused upgrade) is queued; the socket ends after it.
  case responding
  /// The socket is closed; nothing more happens on this connection.
  case closed
}

/// What one WebSocket read produced, handled in order once the codec is done.
enum ReadEvent {
  case codec(WebSocketEvent)
  /// A text message went to the core during the read: apply its effects here.
  case coreTookText
}

/// One connection's whole path: bytes in → (TLS) → HTTP head or WebSocket codec →
/// core input, and its writes. The server keeps accept, routing, the core's effects
/// and shutdown, and knows a connection only through the calls below. The core
/// knows it only by its `ConnectionID`.
final class ServerConnection: TCPConnectionDelegate {
  // Layout matters here (one per connection): keep it within a 160-byte malloc chunk.
  unowned let server: RelayServer
  let id: ConnectionID
  let transport: any ConnectionTransport
  /// A read of it waits for a later turn (RelayServer+Turns.swift): its bytes came in
  /// time, so the head deadline does not cut it meanwhile.
  var hasKeptRead = false
  /// Its last read cost the loop more than `RelayServer.heavyReadNs` (a join into a
  /// big room, a fan-out): its next kept read waits in the heavy lane (ReadLanes).
  var readsHeavy = false
  /// Its place in the server's §5 heartbeats (`.none` until a relay upgrade).
  var heartbeat = Heartbeats.Slot.none
  private(set) var state: ConnectionState
  /// The WebSocket codec, used in the WebSocket states. Held inline and mutated in
  /// place: moving it in and out of `state` copied it on every read.
  var ws: WebSocketConnection

  init(server: RelayServer, id: ConnectionID, transport: any ConnectionTransport, maxHeadBytes: Int, maxMessageBytes: Int) {
    self.server = server
    self.id = id
    self.transport = transport
    self.state = .head(HTTPHeadParser(maxHeadBytes: maxHeadBytes))
    self.ws = WebSocketConnection(role: .server, maxMessageBytes: maxMessageBytes)
  }

  /// The TLS layer, when the listener speaks TLS: it is the transport's sealer, so
  /// a plain connection stores nothing for it.
  var tls: TLSConnection? { transport.sealer as? TLSConnection }

  /// Open or closing: counted among the open WebSockets.
  var isWebSocket: Bool {
    switch state {
    case .open, .closing: return true
    default: return false
    }
  }

  /// A WebSocket that may still get data and pings: not after our close frame
  /// (RFC 6455 §5.5.1). Decided by the connection's state, not the codec's: a read
  /// is decoded whole before its events are handled, so the codec may already have
  /// failed on a later frame while the messages before it are still being answered
  /// (§5.4, §7.1.7: frames are processed in order; the close frame is one of the
  /// read's events and is sent after them). Every codec close reaches `state` through
  /// those events (`.closed`) or through `close` / `slowConsumer`.
  var acceptsFrames: Bool {
    if case .open = state { return true }
    return false
  }

  /// Still reading its request head or body (subject to `--head-timeout`).
  var isReadingRequest: Bool {
    switch state {
    case .head, .body: return true
    default: return false
    }
  }

  // MARK: Transitions

  /// Leaves a WebSocket state for `ending`: no longer counted as open.
  private func end(_ endpoint: Endpoint, clean: Bool) {
    let wasCounted = isWebSocket
    state = .ending(endpoint, clean: clean)
    if wasCounted { server.webSocketLeft(self) }
  }

  /// The socket is gone (the transport's close callback): the last transition. The
  /// core hears of a relay socket once, clean only after a closing handshake.
  func didClose(_ reason: CloseReason) {
    let previous = state
    state = .closed
    switch previous {
    case .open(let e): server.connectionClosed(self, wasCounted: true, coreClean: e == .relay ? false : nil)
    case .closing(let e): server.connectionClosed(self, wasCounted: true, coreClean: e == .relay ? true : nil)
    case .ending(let e, let clean): server.connectionClosed(self, wasCounted: false, coreClean: e == .relay ? clean : nil)
    case .head, .body, .responding, .closed: server.connectionClosed(self, wasCounted: false, coreClean: nil)
    }
  }

  // MARK: Reading

  func connection(_ connection: TCPConnection, didRead bytes: UnsafeMutableRawBufferPointer) {
    didRead(bytes)
  }

  func connection(_ connection: TCPConnection, didCloseWith reason: CloseReason) {
    didClose(reason)
  }

  /// protocol/ §8: bytes the peer acknowledged prove it alive like an inbound frame.
  /// A reader working through a backlog may answer a ping late (it queued behind
  /// data in the kernel); it is slow, not dead, and the outbound cap, not the
  /// heartbeat, decides about it.
  func connectionDidDrain(_ connection: TCPConnection) {
    guard case .open(.relay) = state else { return }
    server.heartbeats.inbound(heartbeat, nowMs: Int64(server.loop.nowMs))
  }

  /// Bytes from the transport: ciphertext when TLS is on, else plaintext. Past the
  /// turn's read budget they wait for a later turn (RelayServer+Turns.swift).
  ///
  /// §5: whatever a relay socket reads proves its peer alive, a store per read
  /// rather than per frame; a read kept for a later turn counts when it arrives, so
  /// backpressure does not make a live client look silent.
  func didRead(_ bytes: UnsafeMutableRawBufferPointer) {
    server.heartbeats.inbound(heartbeat, nowMs: Int64(server.loop.nowMs))
    if server.shouldDeferRead() { return server.readDeferred(self, bytes) }
    handleMeasuredRead(bytes)
  }

  /// `handleRead`, noting whether the read was heavy. Wall time (a vDSO clock read):
  /// a read is microseconds to milliseconds, rarely interrupted; a preemption that
  /// makes a light read look heavy costs one read's place in the lanes.
  func handleMeasuredRead(_ bytes: UnsafeMutableRawBufferPointer) {
    let started = Loop.hrtimeNs()
    handleRead(bytes)
    readsHeavy = Loop.hrtimeNs() &- started > RelayServer.heavyReadNs
  }

  /// `didRead` now, whatever the budget.
  func handleRead(_ bytes: UnsafeMutableRawBufferPointer) {
    if let tls { return readTLS(tls, bytes) }
    readPlaintext(bytes)
  }

  /// Ciphertext in: plaintext goes on into the pipeline; handshake output is
  /// flushed at the end of the turn; a failure ends this connection only.
  private func readTLS(_ tls: TLSConnection, _ bytes: UnsafeMutableRawBufferPointer) {
    tls.receive(UnsafeRawBufferPointer(bytes)) { plaintext in
      guard !transport.isClosed else { return }
      readPlaintext(UnsafeMutableRawBufferPointer(mutating: plaintext))
    }
    if tls.hasOutput { transport.flushSoon() }
    switch tls.state {
    case .handshaking:
      break
    case .established:
      if !tls.reported {
        tls.reported = true
        server.tlsStats.handshakes += 1
      }
    case .closed:
      transport.shutdown()  // close_notify answered, then FIN
    case .failed(let error):
      tlsFailed(tls, error.label, error.description)
    }
  }

  /// A handshake that failed or stalled: counted once by reason; the alert (if
  /// any) goes out, and no close_notify follows a failure.
  func tlsFailed(_ tls: TLSConnection, _ reason: String, _ detail: String) {
    if !tls.reported {
      tls.reported = true
      server.tlsHandshakeFailed(reason: reason, detail: detail)
    }
    markLost()
    transport.shutdown()
  }

  private func readPlaintext(_ bytes: UnsafeMutableRawBufferPointer) {
    switch state {
    case .head(var parser):
      state = .responding  // parser moved out so it is mutated uniquely
      let result = parser.feed(UnsafeRawBufferPointer(bytes))
      state = .head(parser)
      headRead(result, leftover: parser.leftover)
    case .body(let head, var body, let expected):
      state = .responding
      body.append(contentsOf: bytes)
      state = .body(head, body, expected: expected)
      if body.count >= expected { requestRead(head, body: Array(body.prefix(expected))) }
    case .open(let endpoint), .closing(let endpoint):
      feedWebSocket(endpoint, bytes)
    case .ending, .responding, .closed:
      break  // the connection is on its way out; later input is discarded
    }
  }

  // MARK: HTTP

  private func headRead(_ result: HTTPHeadParseResult, leftover: [UInt8]) {
    switch result {
    case .needMore:
      return
    case .invalid(let status):
      respond(status: status, body: Array(HTTPResponse.reasonPhrase(status).utf8))
    case .complete(let head, _):
      server.metrics.httpRequests.increment()
      // RFC 9112 §3.2: an HTTP/1.1 request without exactly one Host is a 400.
      if head.versionMinor >= 1, head.headerCount("host") != 1 {
        return respond(status: 400, body: Array("missing or repeated Host".utf8))
      }
      if let endpoint = server.endpoint(for: head) {
        return upgrade(endpoint, head, leftover: leftover)
      }
      let length = head.contentLength ?? -1
      guard length >= 0, length <= server.config.maxBodyBytes else {
        return respond(status: length < 0 ? 400 : 413, body: Array("bad body length".utf8))
      }
      if leftover.count >= length {
        requestRead(head, body: Array(leftover.prefix(length)))
      } else {
        state = .body(head, leftover, expected: length)
      }
    }
  }

  /// A whole request: the server routes it and answers through `respond`.
  private func requestRead(_ head: HTTPRequestHead, body: [UInt8]) {
    state = .responding
    server.routeHTTP(self, head, body: body)
  }

  /// Writes a complete HTTP response and ends the connection after it is sent
  /// (no keep-alive: the HTTP side is for health checks and admin calls).
  func respond(status: Int, headers: [(String, String)] = [], body: [UInt8]) {
    state = .responding
    _ = transport.write(HTTPResponse.make(status: status, headers: headers, body: body, close: true))
    transport.shutdown()
  }

  // MARK: WebSocket

  private func upgrade(_ endpoint: Endpoint, _ head: HTTPRequestHead, leftover: [UInt8]) {
    if let refusal = server.upgradeRefusal(self) {
      return respond(status: 503, body: Array(refusal.utf8))
    }
    let result = WebSocketHandshake.evaluate(
      head, supportedSubprotocols: endpoint == .relay ? ["relay.v1"] : [],
      refuseUnsupportedOffer: endpoint == .relay, sha1: Crypto.sha1)
    switch result {
    case .reject(_, let response):
      state = .responding
      _ = transport.write(response)
      transport.shutdown()
    case .accept(let response, _):
      // A heartbeat ping or a slow-consumer close may come before the next flush.
      transport.writeHead(response)
      state = .open(endpoint)
      server.webSocketOpened(self, endpoint)
      if !leftover.isEmpty {
        var bytes = leftover
        bytes.withUnsafeMutableBytes { readPlaintext($0) }
      }
    }
  }

  /// Decodes a read (unmasking in place in the read buffer) and handles its events
  /// after the codec is done, since handling one may start a close on the codec.
  /// The connection stays in the server's table throughout: a transport reports its
  /// close only later, never inside the writes and closes made here.
  ///
  /// A standalone relay socket's text messages go to the core borrowed from the
  /// read buffer, inside the codec's call (the core only reads them); their effects,
  /// which may close this connection, are applied in order with the other events.
  private func feedWebSocket(_ endpoint: Endpoint, _ bytes: UnsafeMutableRawBufferPointer) {
    var events = server.readScratch
    server.readScratch = []
    if endpoint == .relay, server.inputs.takesBorrowedText, isWebSocket {
      let server = self.server
      let id = self.id
      ws.receive(
        overwriting: bytes,
        onMessage: { opcode, payload in
          guard opcode == .text else { return events.append(.codec(.binary([]))) }
          if server.inputs.text(id, borrowed: payload) {
            events.append(.coreTookText)
          } else {
            events.append(.codec(.text(Array(payload))))
          }
        }, emit: { events.append(.codec($0)) })
    } else {
      ws.receive(overwriting: bytes) { events.append(.codec($0)) }
    }
    for event in events {
      switch event {
      case .codec(let e): handle(e, endpoint)
      case .coreTookText: server.applyEffects()
      }
    }
    events.removeAll(keepingCapacity: true)
    server.readScratch = events
  }

  private func handle(_ event: WebSocketEvent, _ endpoint: Endpoint) {
    switch event {
    case .write(let bytes):
      send(bytes)
    case .text(let payload):
      if endpoint == .echo {
        if acceptsFrames { send(Framing.frame(.text, payload)) }
      } else if isWebSocket {
        server.inputs.text(id, payload)
      }
    case .binary(let payload):
      if endpoint == .echo {
        if acceptsFrames { send(Framing.frame(.binary, payload)) }
      } else {
        // protocol/ §1: a binary message on /v1/ws closes with 1003.
        close(code: CloseCode.unsupportedData, reason: "binary messages are not accepted")
      }
    case .ping, .pong:
      break  // liveness was noted when the read arrived (didRead)
    case .closed(let code, _, let byPeer):
      // RFC 6455 §7.1.1: the closing handshake is done and the server closes TCP
      // first, after the close reply queued above. A page unloading is not a leave
      // for a client that resumes after it (protocol/ §5, `resume.after_unload`).
      if isWebSocket { end(endpoint, clean: !(byPeer && endpoint == .relay && server.closeLeavesLost(self, peerCode: code))) }
      transport.shutdown()
    }
  }

  /// Starts a close we initiate: close frame now, the socket ends when the peer
  /// answers or after `--close-timeout`.
  func close(code: UInt16, reason: String) {
    guard case .open(let endpoint) = state else { return }
    let frame = ws.close(code: code, reason: reason)
    state = .closing(endpoint)
    if !frame.isEmpty { send(frame) }
    server.closeHandshakeStarted(self)
  }

  /// The peer is presumed dead (protocol/ §5 heartbeat timeout): no closing
  /// handshake, the socket ends now and the participant is lost.
  func drop() {
    // A slow consumer flushing its close 4008 (`.ending` with the socket still open)
    // answers pings late by construction; the flush sweep bounds it, and cutting it
    // now would leave the reader a truncated frame instead of the close (§1).
    if case .ending = state, transport.acceptsWrites { return }
    markLost()
    transport.close()
  }

  /// A WebSocket that ends without a closing handshake: its participant is lost.
  private func markLost() {
    switch state {
    case .open(let e), .closing(let e), .ending(let e, _): end(e, clean: false)
    default: break
    }
  }

  /// A deadline passed for a socket that must not linger (head, close handshake, drain).
  func abort() {
    transport.close()
  }

  func send(_ bytes: [UInt8]) {
    if !transport.write(bytes) { slowConsumer() }
    server.checkOutboundBudget()
  }

  /// A ping or pong, queued ahead of data not yet started (RFC 6455 §5.4, §5.5):
  /// it then waits behind at most the kernel's send buffer and one write in flight,
  /// not behind a backlog of up to `--max-outbound-bytes`.
  func sendControl(_ frame: OutboundBuffer) {
    transport.writeControl(frame)
  }

  func send(_ buffer: OutboundBuffer) {
    enqueue(buffer)
    server.checkOutboundBudget()
  }

  /// `send` without the process-wide budget check, for the fan-out loop, which
  /// checks the budget itself (RelayServer.deliver).
  @inline(__always) func enqueue(_ buffer: OutboundBuffer) {
    if !transport.write(buffer) { slowConsumer() }
  }

  /// protocol/ §1: over `--max-outbound-bytes` not taken by the kernel (or chosen
  /// by the process-wide budget) → close 4008 and free the queue. Whole frames the
  /// kernel has not started on are dropped at once; the close frame follows the
  /// bytes in flight (at most `Loop.maxInFlightBytes`, and the frame or the
  /// copy chunk of small frames begun, `Loop.copyChunkBytes`), so a
  /// reader that is slow but reading gets it (OutboundBudget.swift ends the socket
  /// once it is flushed). The participant is lost, not gone: 4008 means "resume"
  /// (§14). A write refused because the connection is already ending is not
  /// counted again.
  func slowConsumer() {
    guard transport.acceptsWrites else { return }
    switch state {
    case .responding, .ending, .closed: return
    case .head, .body:
      server.slowConsumerCounted(self)
      transport.discardUnsent()
      transport.close()
    case .closing(let e):
      server.slowConsumerCounted(self)
      transport.discardUnsent()
      end(e, clean: true)
      transport.close()
    case .open(let e):
      server.slowConsumerCounted(self)
      transport.discardUnsent()
      guard ws.state == .open else {
        end(e, clean: false)
        return transport.close()
      }
      let frame = ws.close(code: CloseCode.slowConsumer, reason: "slow consumer")
      _ = transport.writeFinal(frame)
      end(e, clean: false)
      server.slowConsumerFlushing(self)
    }
  }
}

/// The server's connections by id (fan-out resolves every recipient here): the core's
/// reference table with the cheap hash for server-assigned ids.
enum ServerConnectionsById: TableKeying {
  static func key(of element: ServerConnection) -> ConnectionID { element.id }
  static func hash(_ key: ConnectionID) -> UInt64 { key.tableHash }
}
