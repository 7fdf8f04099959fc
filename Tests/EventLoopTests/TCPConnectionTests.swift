import EventLoop
import Testing

@Suite("TCP connections over loopback")
struct TCPConnectionTests {
  @Test("a connector given a source address leaves from it (load-test bots spread over 127/8)")
  func sourceAddress() {
    let fixture = LoopFixture()
    var seen = ""
    fixture.connectedPair(source: "127.0.0.3") { server, client in
      seen = server.remoteAddress
      server.close()
      client.close()
    }
    fixture.runAndClose()
    #expect(seen.hasPrefix("127.0.0.3:"))
  }

  @Test("a source address this host does not have fails the connect, inside the call")
  func foreignSourceAddress() {
    let fixture = LoopFixture()
    var failure: LoopError?
    TCPConnector.connect(loop: fixture.loop, host: "127.0.0.1", port: 9, source: "192.0.2.1") { result in
      if case .failure(let error) = result { failure = error }
    }
    #expect(failure != nil)
    fixture.runAndClose()
  }

  @Test("listener and connector round trip, then peer EOF")
  func roundTrip() {
    let fixture = LoopFixture()
    var serverReceived: [UInt8] = []
    var clientReceived: [UInt8] = []
    var serverReasons: [CloseReason] = []
    var clientReasons: [CloseReason] = []
    fixture.connectedPair { server, client in
      #expect(server.remoteAddress.hasPrefix("127.0.0.1:"))
      #expect(client.remoteAddress.hasPrefix("127.0.0.1:"))
      server.onRead = { bytes in
        serverReceived += bytes
        server.write(Array(bytes))
      }
      server.onClose = { serverReasons.append($0) }
      client.onRead = { bytes in
        clientReceived += bytes
        if clientReceived.count == 5 { client.close() }
      }
      client.onClose = { clientReasons.append($0) }
      server.startReading()
      client.startReading()
      #expect(client.write(Array("hello".utf8)))
    }
    fixture.runAndClose()
    #expect(serverReceived == Array("hello".utf8))
    #expect(clientReceived == Array("hello".utf8))
    #expect(clientReasons.count == 1 && clientReasons.first?.isLocal == true)
    #expect(serverReasons.count == 1 && serverReasons.first?.isEOF == true)
  }

  @Test("a delegate receives writable reads and the close once, then is dropped")
  func delegateReceivesReadsAndCloseOnce() {
    final class Recorder: TCPConnectionDelegate {
      var received: [UInt8] = []
      var reasons: [CloseReason] = []
      func connection(_ connection: TCPConnection, didRead bytes: UnsafeMutableRawBufferPointer) {
        received += bytes
        bytes.initializeMemory(as: UInt8.self, repeating: 0)  // the buffer is ours to overwrite
        if received.count >= 5 { connection.close() }
      }
      func connection(_ connection: TCPConnection, didCloseWith reason: CloseReason) {
        reasons.append(reason)
      }
    }
    let fixture = LoopFixture()
    let recorder = Recorder()
    var server: TCPConnection?
    fixture.connectedPair { accepted, client in
      server = accepted
      accepted.delegate = recorder
      #expect(accepted.onRead == nil)
      accepted.startReading()
      client.startReading()  // sees the server's close as EOF, and closes too
      #expect(client.write(Array("hello".utf8)))
      #expect(client.write(Array(" world".utf8)))  // two buffers queued in one turn
    }
    fixture.runAndClose()
    #expect(recorder.received.prefix(5) == ArraySlice("hello".utf8))
    #expect(recorder.reasons.count == 1 && recorder.reasons.first?.isLocal == true)
    #expect(server?.delegate == nil)  // dropped after the close, breaking the cycle
  }

  @Test("echo of 1 MiB written in uneven pieces arrives intact and in order")
  func echoOneMebibyte() {
    let payload = patternBytes(count: 1 << 20)
    let fixture = LoopFixture()
    var echoed: [UInt8] = []
    echoed.reserveCapacity(payload.count)
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 4 << 20
      server.onRead = { bytes in
        #expect(server.write(Array(bytes)))
      }
      client.onRead = { bytes in
        echoed += bytes
        if echoed.count >= payload.count { client.close() }
      }
      client.onClose = { _ in server.close() }
      server.startReading()
      client.startReading()
      client.maxOutboundBytes = 2 << 20
      var offset = 0
      while offset < payload.count {
        let end = min(offset + 7_919, payload.count)
        #expect(client.write(Array(payload[offset..<end])))
        offset = end
      }
    }
    fixture.runAndClose()
    #expect(echoed.count == payload.count)
    #expect(firstMismatch(echoed, payload) == nil)
  }

  @Test("many writes in one turn become one gathered uv_try_write")
  func writesInOneTurnAreGathered() {
    let fixture = LoopFixture()
    let pieces = (0..<200).map { patternBytes(count: 37, seed: UInt32($0 + 1)) }
    let expected = pieces.flatMap { $0 }
    var received: [UInt8] = []
    var statsAfterWrites = LoopStats()
    var statsAtReceipt = LoopStats()
    fixture.connectedPair { server, client in
      server.onRead = { bytes in
        received += bytes
        guard received.count == expected.count else { return }
        statsAtReceipt = fixture.loop.stats
        server.close()
        client.close()
      }
      server.startReading()
      statsAfterWrites = fixture.loop.stats
      for piece in pieces { client.write(piece) }
      #expect(client.queuedBytes == expected.count)
    }
    fixture.runAndClose()
    #expect(received == expected)
    #expect(statsAtReceipt.tryWriteCalls - statsAfterWrites.tryWriteCalls == 1)
    #expect(statsAtReceipt.flushes - statsAfterWrites.flushes == 1)
    #expect(statsAtReceipt.writeRequests == statsAfterWrites.writeRequests)
  }

  @Test("flushNow() writes at once; runOnce(nowait:) drives the loop step by step")
  func flushNowAndRunOnce() {
    let fixture = LoopFixture()
    var received: [UInt8] = []
    var connected: (server: TCPConnection, client: TCPConnection)?
    fixture.connectedPair { server, client in connected = (server, client) }
    for _ in 0..<1_000 where connected == nil { fixture.loop.runOnce(nowait: false) }
    guard let (server, client) = connected else {
      Issue.record("no connection")
      return fixture.close()
    }
    server.onRead = { received += $0 }
    server.startReading()
    let before = fixture.loop.stats.tryWriteCalls
    client.write([1, 2, 3])
    #expect(client.queuedBytes == 3)
    client.flushNow()
    #expect(fixture.loop.stats.tryWriteCalls == before + 1)
    #expect(client.queuedBytes == 0)
    for _ in 0..<1_000 where received.count < 3 { fixture.loop.runOnce(nowait: false) }
    #expect(received == [1, 2, 3])
    server.close()
    client.close()
    fixture.loop.runOnce(nowait: true)
    #expect(server.isClosed && client.isClosed)
    fixture.runAndClose()
  }

  @Test("one OutboundBuffer is shared by three connections and released after the writes")
  func sharedBufferFanOut() {
    let fixture = LoopFixture()
    let listener = try! TCPListener(loop: fixture.loop, host: "127.0.0.1", port: 0)
    let message = patternBytes(count: 10_000)
    var servers: [TCPConnection] = []
    var receivedByClient: [Int: [UInt8]] = [:]
    var shared: OutboundBuffer? = OutboundBuffer(count: message.count) { destination in
      message.withUnsafeBytes { destination.copyMemory(from: $0) }
    }
    var uniqueAfterDelivery = false
    try! listener.listen { server in
      servers.append(server)
      guard servers.count == 3, let buffer = shared else { return }
      listener.close()
      for connection in servers { #expect(connection.write(buffer)) }
      shared = nil
    }
    for index in 0..<3 {
      TCPConnector.connect(loop: fixture.loop, host: "127.0.0.1", port: listener.port) { result in
        guard case .success(let client) = result else {
          Issue.record("connect failed")
          return
        }
        client.onRead = { bytes in
          receivedByClient[index, default: []] += bytes
          guard receivedByClient.values.map(\.count).reduce(0, +) == 3 * message.count else { return }
          uniqueAfterDelivery = servers.allSatisfy { $0.queuedBytes == 0 }
          for connection in servers { connection.close() }
        }
        client.startReading()
      }
    }
    fixture.runAndClose()
    #expect(receivedByClient.count == 3)
    #expect(receivedByClient.values.allSatisfy { $0 == message })
    #expect(uniqueAfterDelivery)
  }

  @Test("reset(): the peer's read fails with ECONNRESET")
  func resetIsSeenAsConnectionReset() {
    let fixture = LoopFixture()
    var clientReason: CloseReason?
    var serverReason: CloseReason?
    fixture.connectedPair { server, client in
      client.onClose = { clientReason = $0 }
      server.onClose = { serverReason = $0 }
      client.startReading()
      server.reset()
      #expect(server.isClosed)
    }
    fixture.runAndClose()
    #expect(serverReason?.isLocal == true)
    #expect(clientReason?.error == .connectionReset)
  }

  @Test("shutdown() flushes everything queued, across partial writes, before closing")
  func shutdownFlushesQueuedData() {
    let payload = patternBytes(count: 16 << 20, seed: 7)
    let fixture = LoopFixture()
    var received: [UInt8] = []
    var serverReason: CloseReason?
    var clientReason: CloseReason?
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 32 << 20
      server.onClose = { serverReason = $0 }
      client.onRead = { received += $0 }
      client.onClose = { clientReason = $0 }
      // Start reading late, so the kernel buffers fill and uv_try_write writes only
      // part: the remainder must go out through uv_write.
      let delay = EventLoop.Timer(loop: fixture.loop)
      delay.start(afterMs: 20) {
        client.startReading()
        delay.close()
      }
      for offset in stride(from: 0, to: payload.count, by: 1 << 20) {
        #expect(server.write(Array(payload[offset..<(offset + (1 << 20))])))
      }
      server.shutdown()
      #expect(server.isShuttingDown)
      #expect(!server.write([1]))
    }
    fixture.runAndClose()
    #expect(received.count == payload.count)
    #expect(firstMismatch(received, payload) == nil)
    #expect(serverReason?.isLocal == true)
    #expect(clientReason?.isEOF == true)
    #expect(fixture.loop.stats.writeRequests > 0)
  }

  @Test("writing to a peer that reset: the flush fails and onClose reports the error")
  func writeToResetPeerFails() {
    let fixture = LoopFixture()
    var serverReason: CloseReason?
    fixture.connectedPair { server, client in
      server.onClose = { serverReason = $0 }
      client.reset()
      let later = EventLoop.Timer(loop: fixture.loop)
      later.start(afterMs: 20, repeatMs: 5) {
        // The first write may still be accepted by the kernel; the next one fails.
        guard server.isClosed || !server.write([UInt8](repeating: 1, count: 1_000)) else { return }
        later.close()
      }
    }
    fixture.runAndClose()
    let code = serverReason?.error?.code
    #expect(code == LoopError.connectionReset.code || code == -32 /* EPIPE */)
  }

  @Test("bytes written from a close callback are flushed before run() returns")
  func writeFromCloseCallbackIsFlushed() {
    let fixture = LoopFixture()
    let message = patternBytes(count: 1_000)
    var idleClient: TCPConnection?
    var idleServer: TCPConnection?
    fixture.connectedPair { server, client in
      idleServer = server
      idleClient = client
      fixture.connectedPair { server2, client2 in
        server2.onClose = { _ in idleClient?.write(message) }
        server2.startReading()
        client2.close()
      }
    }
    fixture.run()
    #expect(idleClient?.queuedBytes == 0)
    #expect(fixture.loop.stats.bytesWritten >= UInt64(message.count))
    idleClient?.close()
    idleServer?.close()
    fixture.close()
  }

  @Test("peer EOF with data still queued: the data is flushed, then onClose(.eof)")
  func eofWithQueuedDataClosesGracefully() {
    let payload = patternBytes(count: 3 << 20, seed: 3)
    let fixture = LoopFixture()
    var received = 0
    var serverReason: CloseReason?
    var clientReason: CloseReason?
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 4 << 20
      server.onClose = { serverReason = $0 }
      server.startReading()
      #expect(server.write(payload))
      client.onRead = { received += $0.count }
      client.onClose = { clientReason = $0 }
      client.shutdown()
    }
    fixture.runAndClose()
    #expect(received == payload.count)
    #expect(serverReason?.isEOF == true)
    #expect(clientReason?.isLocal == true)
  }

  @Test("close() inside onRead, double close and write after close")
  func closeFromInsideOnRead() {
    let fixture = LoopFixture()
    var serverCloses = 0
    var readsAfterClose = 0
    var writeAfterClose: Bool?
    var clientReason: CloseReason?
    fixture.connectedPair { server, client in
      server.onRead = { _ in
        if server.isClosed { readsAfterClose += 1 }
        server.close()
        server.close()
        writeAfterClose = server.write([1, 2, 3])
        server.shutdown()
        server.reset()
      }
      server.onClose = { reason in
        serverCloses += 1
        #expect(reason.isLocal)
      }
      client.onClose = { clientReason = $0 }
      server.startReading()
      client.startReading()
      client.write([UInt8](repeating: 9, count: 100))
      client.write([UInt8](repeating: 8, count: 100))
    }
    fixture.runAndClose()
    #expect(serverCloses == 1)
    #expect(readsAfterClose == 0)
    #expect(writeAfterClose == false)
    #expect(clientReason?.isEOF == true)
  }

  @Test("shutdown() then close() reports .local exactly once")
  func shutdownThenClose() {
    let fixture = LoopFixture()
    var serverReasons: [CloseReason] = []
    fixture.connectedPair { server, client in
      server.onClose = { serverReasons.append($0) }
      server.write([UInt8](repeating: 5, count: 1_000))
      server.shutdown()
      server.close()
      #expect(server.isClosed)
      client.close()
    }
    fixture.runAndClose()
    #expect(serverReasons.count == 1 && serverReasons.first?.isLocal == true)
  }

  @Test("graceful close gives up after the linger deadline when the peer never closes")
  func lingerDeadlineBoundsShutdown() {
    let fixture = LoopFixture(lingerTimeoutMs: 50)
    var serverReason: CloseReason?
    var closedAfterMs: UInt64 = 0
    var clientSawEOF = false
    fixture.connectedPair { server, client in
      let start = fixture.loop.nowMs
      server.onClose = { reason in
        serverReason = reason
        fixture.loop.updateTime()
        closedAfterMs = fixture.loop.nowMs - start
        client.close()
      }
      // The client never reads, so it never sees the server's FIN and never closes:
      // the server must give up waiting at its linger deadline.
      client.onClose = { reason in clientSawEOF = reason.isEOF }
      server.shutdown()
    }
    fixture.runAndClose()
    #expect(serverReason?.isLocal == true)
    #expect(closedAfterMs >= 40)
    #expect(!clientSawEOF)
  }

  @Test("connecting to a closed port fails with ECONNREFUSED; bad hosts throw")
  func connectErrors() {
    let fixture = LoopFixture()
    let probe = try! TCPListener(loop: fixture.loop, host: "127.0.0.1", port: 0)
    let port = probe.port
    probe.close()
    var result: Result<TCPConnection, LoopError>?
    TCPConnector.connect(loop: fixture.loop, host: "127.0.0.1", port: port) { result = $0 }
    var invalid: Result<TCPConnection, LoopError>?
    TCPConnector.connect(loop: fixture.loop, host: "not-an-ip", port: 1) { invalid = $0 }
    #expect(throws: LoopError.self) { try TCPListener(loop: fixture.loop, host: "300.1.1.1", port: 0) }
    #expect(throws: LoopError.self) { try TCPListener(loop: fixture.loop, host: "127.0.0.1", port: 70_000) }
    fixture.runAndClose()
    if case .failure(let error) = result { #expect(error == .connectionRefused) } else { Issue.record("expected refusal") }
    if case .failure = invalid {} else { Issue.record("expected an invalid-address failure") }
  }

  @Test("IPv6 loopback works when the host has it")
  func ipv6Loopback() throws {
    let fixture = LoopFixture()
    guard let listener = try? TCPListener(loop: fixture.loop, host: "::1", port: 0) else {
      fixture.runAndClose()
      return
    }
    var accepted = false
    var address = ""
    try listener.listen { server in
      accepted = true
      address = server.remoteAddress
      server.close()
      listener.close()
    }
    TCPConnector.connect(loop: fixture.loop, host: "::1", port: listener.port) { result in
      if case .success(let client) = result { client.close() } else { listener.close() }
    }
    fixture.runAndClose()
    #expect(accepted)
    #expect(address.hasPrefix("[::1]:"))
  }
}
