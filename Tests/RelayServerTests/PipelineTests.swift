// The connection pipeline (ServerConnection.swift) driven through an in-memory
// transport: bytes in, through TLS, the HTTP head and the WebSocket codec into the
// real core, and the bytes it writes back, with no socket and no running loop.
import EventLoop
import Logging
import RelayCore
import RelayCrypto
import RelayProtocol
import RelayWebSocket
import TestSupport
import Testing

@testable import RelayServer
import RelayPrimitives

/// A relay built as `relay serve` builds it (dev mode, echo on), never started: the
/// tests adopt in-memory transports instead of accepting sockets.
func withServer(_ tweak: (inout ServerConfig) -> Void = { _ in }, _ body: (Net) throws -> Void) rethrows {
  var config = ServerConfig(core: CoreConfig(devMode: true, serverVersion: "test"))
  config.echo = true
  tweak(&config)
  let server = RelayServer(config: config, logger: Logger(label: "pipeline-test"), verifyToken: { _, _ in nil })
  defer { server.loop.close() }
  try body(Net(server))
}

/// The server and its transports; each input ends a loop turn, when every
/// transport flushes, as the loop's cork does.
final class Net {
  let server: RelayServer
  var transports: [MemoryTransport] = []
  init(_ server: RelayServer) { self.server = server }
  func endTurn() { for t in transports { t.flush() } }
}

/// One client of the pipeline: its transport, and its own WebSocket codec to read
/// the server's frames and mask its own.
final class Peer {
  let transport = MemoryTransport()
  let conn: ServerConnection
  let net: Net
  var ws = WebSocketConnection(role: .client, maxMessageBytes: 1 << 20, maskSeed: 7)
  private var inbound: [UInt8] = []

  init(_ net: Net) {
    self.net = net
    conn = net.server.adopt(transport)
    transport.connection = conn
    net.transports.append(transport)
  }

  /// One read by the server, then the end of its turn.
  func deliver(_ bytes: [UInt8]) {
    transport.receive(bytes)
    net.endTurn()
  }

  /// Sends the upgrade request and returns the server's answer.
  @discardableResult
  func upgrade(path: String = "/v1/ws", protocols: [String] = ["relay.v1"]) -> WebSocketClientHandshake.Outcome {
    let (request, key) = WebSocketClientHandshake.request(
      host: "127.0.0.1", target: path, key: Array(repeating: 9, count: 16), subprotocols: protocols)
    deliver(request)
    let outcome = WebSocketClientHandshake.evaluateResponse(
      transport.take(), key: key, offeredSubprotocols: protocols, sha1: Crypto.sha1)
    if case .accepted(_, let leftover) = outcome { inbound = leftover }
    return outcome
  }

  func send(_ text: String) { deliver(ws.encode(.text, Array(text.utf8))) }
  func sendBinary(_ bytes: [UInt8]) { deliver(ws.encode(.binary, bytes)) }

  /// The frames the server sent since the last call, decoded; what the client's
  /// codec answers (pongs, the close reply) goes back as a real client's would.
  func events() -> [WebSocketEvent] {
    var out: [WebSocketEvent] = []
    let bytes = inbound + transport.take()
    inbound = []
    ws.receive(bytes) { out.append($0) }
    for case .write(let reply) in out { deliver(reply) }
    return out
  }

  func texts() -> [String] {
    events().compactMap { if case .text(let t) = $0 { return String(decoding: t, as: UTF8.self) } else { return nil } }
  }

  /// Says hello in dev mode; returns the welcome.
  func hello(_ uid: String) -> String? {
    send(#"{"type":"hello","id":"h","dev":{"uid":"\#(uid)","name":"\#(uid)"}}"#)
    return texts().first
  }
}

private func isClosed(_ events: [WebSocketEvent], code: UInt16) -> Bool {
  events.contains { if case .closed(code, _, _) = $0 { return true } else { return false } }
}

@Suite struct PipelineTests {
  @Test("upgrade, hello and a session message reach the core and come back as frames")
  func upgradeIntoTheCore() throws {
    try withServer { net in
      let server = net.server
      let alice = Peer(net)
      guard case .accepted(let proto, _) = alice.upgrade() else { Issue.record("not upgraded"); return }
      #expect(proto == "relay.v1")
      #expect(server.websocketCount == 1)
      #expect(alice.hello("alice")?.contains(#""type":"welcome""#) == true)
      let bob = Peer(net)
      bob.upgrade()
      _ = bob.hello("bob")
      alice.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      bob.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      _ = alice.texts()
      _ = bob.texts()
      bob.send(#"{"type":"message.send","id":"m","session":"r","data":{"n":1}}"#)
      #expect(alice.texts().contains { $0.contains(#""type":"message""#) && $0.contains(#""n":1"#) })
    }
  }

  @Test("a request head split byte by byte, then a plain HTTP answer and the end of the connection")
  func httpByteByByte() throws {
    try withServer { net in
      let server = net.server
      let peer = Peer(net)
      for byte in Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8) { peer.deliver([byte]) }
      let answer = String(decoding: peer.transport.take(), as: UTF8.self)
      #expect(answer.hasPrefix("HTTP/1.1 200"))
      #expect(answer.hasSuffix("ok"))
      #expect(peer.transport.state == .shuttingDown)
      peer.transport.runPendingClose()
      #expect(server.connections.isEmpty)
    }
  }

  @Test("a head not complete within --head-timeout ends the connection; an upgraded one is untouched")
  func headTimeout() throws {
    try withServer({ $0.headTimeoutMs = 1_000 }) { net in
      let server = net.server
      let slow = Peer(net)
      slow.deliver(Array("GET /v1/ws HTTP/1.1\r\nHo".utf8))
      let upgraded = Peer(net)
      upgraded.upgrade()
      server.sweep(nowMs: server.now.monoMs + 999)
      #expect(slow.transport.state == .open)
      server.sweep(nowMs: server.now.monoMs + 1_001)
      #expect(slow.transport.state == .closed)
      #expect(upgraded.transport.state == .open)
      slow.transport.runPendingClose()
      #expect(server.connections.count == 1)
    }
  }

  @Test("a binary message on /v1/ws closes 1003; the peer's reply ends it cleanly, counted once")
  func binaryFrameCloses() throws {
    try withServer { net in
      let server = net.server
      let peer = Peer(net)
      peer.upgrade()
      _ = peer.hello("alice")
      peer.sendBinary([1, 2, 3])
      guard case .closing(.relay) = peer.conn.state else { Issue.record("not closing: \(peer.conn.state)"); return }
      #expect(server.websocketCount == 1)
      #expect(isClosed(peer.events(), code: CloseCode.unsupportedData))  // and the client replies
      guard case .ending(.relay, clean: true) = peer.conn.state else { Issue.record("not ending: \(peer.conn.state)"); return }
      #expect(server.websocketCount == 0)
      #expect(peer.transport.state == .shuttingDown)
      peer.transport.runPendingClose()
      #expect(server.websocketCount == 0)
      #expect(server.connections.isEmpty)
    }
  }

  @Test("/v1/echo sends text and binary back")
  func echo() throws {
    try withServer { net in
      let server = net.server
      let peer = Peer(net)
      peer.upgrade(path: "/v1/echo", protocols: [])
      peer.send("hi")
      peer.sendBinary([0, 255])
      #expect(peer.events() == [.text(Array("hi".utf8)), .binary([0, 255])])
    }
  }

  @Test("a message and a bad frame in one read: the message is answered, then the close 1002 (RFC 6455 §5.4)")
  func messageBeforeViolationInOneRead() throws {
    try withServer { net in
      let echo = Peer(net)
      echo.upgrade(path: "/v1/echo", protocols: [])
      echo.deliver(echo.ws.encode(.text, Array("good".utf8)) + [0x83, 0x80, 0, 0, 0, 0])  // opcode 3: reserved
      let echoed = echo.events()
      #expect(echoed.first == .text(Array("good".utf8)), "\(echoed)")
      #expect(isClosed(echoed, code: CloseCode.protocolError))
      let relay = Peer(net)
      relay.upgrade()
      let hello = #"{"type":"hello","id":"h","dev":{"uid":"alice","name":"alice"}}"#
      relay.deliver(relay.ws.encode(.text, Array(hello.utf8)) + [0xC1, 0x80, 0, 0, 0, 0])  // RSV1 set
      let answered = relay.events()
      guard case .text(let welcome) = answered.first else { Issue.record("no welcome first: \(answered)"); return }
      #expect(String(decoding: welcome, as: UTF8.self).contains(#""type":"welcome""#))
      #expect(isClosed(answered, code: CloseCode.protocolError))
    }
  }

  @Test("a peer that stops reading is closed 4008 after the frames already begun, and is lost, not gone")
  func slowConsumer() throws {
    try withServer({ $0.maxOutboundBytes = 4_096 }) { net in
      let server = net.server
      let watcher = Peer(net)
      watcher.upgrade()
      _ = watcher.hello("watcher")
      watcher.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      let stalled = Peer(net)
      stalled.upgrade()
      _ = stalled.hello("stalled")
      stalled.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      _ = stalled.events()
      _ = watcher.texts()
      stalled.transport.peerReads = false
      let big = String(repeating: "x", count: 1_000)
      for i in 0..<10 { watcher.send(#"{"type":"message.send","id":"m\#(i)","session":"r","data":"\#(big)"}"#) }
      guard case .ending(.relay, clean: false) = stalled.conn.state else { Issue.record("not ending: \(stalled.conn.state)"); return }
      #expect(String(decoding: server.metrics.exposition(), as: UTF8.self).contains("relay_slow_consumer_closes_total 1"))
      #expect(server.websocketCount == 1)
      stalled.transport.peerReads = true
      #expect(isClosed(stalled.events(), code: CloseCode.slowConsumer))
      _ = watcher.texts()
      stalled.transport.close()
      stalled.transport.runPendingClose()
      #expect(watcher.texts().contains { $0.contains(#""type":"participant.lost""#) || $0.contains(#""status":"lost""#) })
    }
  }

  @Test("drain closes every WebSocket with 1001, refuses new upgrades, and stops when the last one is gone")
  func drain() throws {
    try withServer { net in
      let server = net.server
      let peer = Peer(net)
      peer.upgrade()
      _ = peer.hello("alice")
      server.beginDrain()
      net.endTurn()
      guard case .closing = peer.conn.state else { Issue.record("not closing: \(peer.conn.state)"); return }
      let late = Peer(net)
      guard case .refused(503, _) = late.upgrade() else { Issue.record("late upgrade not refused"); return }
      #expect(!server.stopped)
      #expect(isClosed(peer.events(), code: CloseCode.goingAway))  // and the client replies
      #expect(server.websocketCount == 0)
      #expect(server.stopped)
    }
  }

  @Test("TLS: plain HTTP and a stalled handshake fail with their reasons; a real handshake upgrades")
  func tls() throws {
    let pair = try TestCertificate.make("ec")
    try withServer({
      $0.tlsCertFile = pair.cert
      $0.tlsKeyFile = pair.key
    }) { net in
      let server = net.server
      try server.loadTLS()
      let plain = Peer(net)
      plain.deliver(Array("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n".utf8))
      #expect(plain.transport.state == .shuttingDown)
      #expect(server.tlsStats.failures["plain_http"] == 1)

      let stalled = Peer(net)
      stalled.deliver([0x16, 0x03, 0x01])  // a record header, then nothing
      server.sweep(nowMs: server.now.monoMs + server.config.core.helloTimeoutMs + 1)
      #expect(stalled.transport.state == .closed)
      #expect(server.tlsStats.failures["timeout"] == 1)

      // A client TLS connection pumped through the transport by hand.
      let peer = Peer(net)
      let client = TLSConnection(context: try TLSContext(clientWithCA: pair.cert), serverName: "localhost", isServer: false)
      var plaintext: [UInt8] = []
      func pump() {
        for _ in 0..<8 {
          let out = client.takeOutput()
          if !out.isEmpty { peer.deliver(out) }
          let back = peer.transport.take()
          if back.isEmpty && out.isEmpty { break }
          back.withUnsafeBytes { client.receive($0) { plaintext += $0 } }
        }
      }
      pump()
      #expect(client.state == .established)
      #expect(server.tlsStats.handshakes == 1)
      let (request, _) = WebSocketClientHandshake.request(
        host: "localhost", target: "/v1/echo", key: Array(repeating: 3, count: 16))
      request.withUnsafeBytes { _ = client.seal($0) }
      pump()
      #expect(String(decoding: plaintext, as: UTF8.self).hasPrefix("HTTP/1.1 101"))
      guard case .open(.echo) = peer.conn.state else { Issue.record("not upgraded: \(peer.conn.state)"); return }
    }
  }

  @Test("a heartbeat ping or a slow-consumer close before the next flush goes behind the 101, not ahead of it")
  func controlFramesWaitBehindTheUpgradeResponse() throws {
    try withServer { net in
      let peer = Peer(net)
      let (request, key) = WebSocketClientHandshake.request(
        host: "127.0.0.1", target: "/v1/ws", key: Array(repeating: 9, count: 16), subprotocols: ["relay.v1"])
      peer.transport.receive(request)  // the turn has not ended: the 101 is still queued
      net.server.sendPing(peer.conn)
      let bytes = peer.transport.take()
      #expect(String(decoding: bytes.prefix(12), as: UTF8.self) == "HTTP/1.1 101")
      guard case .accepted(_, let leftover) = WebSocketClientHandshake.evaluateResponse(
        bytes, key: key, offeredSubprotocols: ["relay.v1"], sha1: Crypto.sha1)
      else { Issue.record("not a 101 first"); return }
      #expect(leftover == Framing.frame(.ping, []).withUnsafeBytes { Array($0) })

      let slow = Peer(net)
      slow.transport.receive(request)
      slow.conn.slowConsumer()
      #expect(String(decoding: slow.transport.take().prefix(12), as: UTF8.self) == "HTTP/1.1 101")
    }
  }
}
