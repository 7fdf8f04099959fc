import EventLoop
import Testing

@Suite("TCP connections over loopback")
struct TCPConnectionTests {
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

  @Test("echo of 1 MiB written in uneven pieces arrives intact and in order")
  func echoOneMebibyte() {
    let fixture = LoopFixture()
    let payload = patternBytes(count: 1 << 20)
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
    #expect(echoed == payload)
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

  @Test("a peer that never reads: write refuses beyond maxOutboundBytes")
  func slowConsumerHitsTheCap() {
    let fixture = LoopFixture(timeoutMs: 10_000)
    let chunk = OutboundBuffer(bytes: patternBytes(count: 64 * 1024))
    var refusedWithQueued = -1
    var limit = 0
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 256 * 1024
      limit = server.maxOutboundBytes
      let pump = EventLoop.Timer(loop: fixture.loop)
      pump.start(afterMs: 0, repeatMs: 1) {
        while server.write(chunk) {}
        guard server.queuedBytes + chunk.count > server.maxOutboundBytes,
          server.queuedBytes > server.maxOutboundBytes / 2
        else { return }
        // Still over half the cap after a flush: the kernel buffers are full.
        refusedWithQueued = server.queuedBytes
        pump.close()
        server.close()
        client.close()
      }
    }
    fixture.runAndClose()
    #expect(refusedWithQueued > 0)
    #expect(refusedWithQueued <= limit)
  }

  @Test("write returns false once queued bytes would exceed the cap within one turn")
  func capIsCheckedAtEnqueue() {
    let fixture = LoopFixture()
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 1_000
      #expect(server.write([UInt8](repeating: 1, count: 600)))
      #expect(!server.write([UInt8](repeating: 2, count: 401)))
      #expect(server.write([UInt8](repeating: 3, count: 400)))
      #expect(server.queuedBytes == 1_000)
      #expect(!server.write([4]))
      server.close()
      client.close()
    }
    fixture.runAndClose()
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

  @Test("shutdown() flushes everything queued before closing")
  func shutdownFlushesQueuedData() {
    let fixture = LoopFixture()
    let payload = patternBytes(count: 4 << 20, seed: 7)
    var received: [UInt8] = []
    var serverReason: CloseReason?
    var clientReason: CloseReason?
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 8 << 20
      server.onClose = { serverReason = $0 }
      client.onRead = { received += $0 }
      client.onClose = { clientReason = $0 }
      client.startReading()
      #expect(server.write(payload))
      server.shutdown()
      #expect(server.isShuttingDown)
      #expect(!server.write([1]))
    }
    fixture.runAndClose()
    #expect(received.count == payload.count)
    #expect(received == payload)
    #expect(serverReason?.isLocal == true)
    #expect(clientReason?.isEOF == true)
  }

  @Test("peer EOF with data still queued: the data is flushed, then onClose(.eof)")
  func eofWithQueuedDataClosesGracefully() {
    let fixture = LoopFixture()
    let payload = patternBytes(count: 3 << 20, seed: 3)
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
      // The client reads (sees EOF) but never closes: its own EOF path would close it,
      // so keep it from reading and let the server linger.
      client.onRead = { _ in }
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
