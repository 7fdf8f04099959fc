import EventLoop
import Testing

// The write path of TCPConnection over loopback: the outbound cap, ordering across
// copied and shared buffers, copy chunks held by writes in flight.
@Suite("TCP connection writes over loopback")
struct TCPConnectionWriteTests {
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
    // A refused buffer stays queued (frame boundaries), so one chunk may sit over the cap.
    #expect(refusedWithQueued <= limit + chunk.count)
  }

  @Test("over the cap, write tries the kernel first: a reader that keeps up is not refused")
  func capCountsOnlyWhatTheKernelRefuses() {
    let fixture = LoopFixture()
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 1_000
      #expect(server.write([UInt8](repeating: 1, count: 600)))
      #expect(server.queuedBytes == 600)  // corked: nothing written yet this turn
      // Over the cap: offered to the kernel now, which takes it all.
      #expect(server.write([UInt8](repeating: 2, count: 5_000)))
      #expect(server.queuedBytes == 0)
      server.close()
      client.close()
    }
    fixture.runAndClose()
  }

  @Test("small writes (copied) and large ones (shared, some sharing an array's storage), across turns and uv_writes in flight, arrive in order")
  func copiedAndSharedWritesKeepOrder() {
    let fixture = LoopFixture(timeoutMs: 20_000)
    var expected: [UInt8] = []
    var received: [UInt8] = []
    var state: UInt32 = 12_345
    func next(_ bound: Int) -> Int {
      state = state &* 1_664_525 &+ 1_013_904_223
      return Int(state >> 8) % bound
    }
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 256 << 20
      client.onRead = { received += $0 }
      // The reader starts late, so the kernel refuses part of the queue and the rest
      // goes through uv_write while more small frames arrive turn after turn.
      let ticker = EventLoop.Timer(loop: fixture.loop)
      var tick = 0
      ticker.start(afterMs: 1, repeatMs: 1) {
        tick += 1
        // The reader pauses now and then, so writes stay partial and a uv_write is
        // often in flight, sometimes holding the last copy chunk.
        if tick % 50 == 40 { client.startReading() } else if tick % 50 == 0 { client.stopReading() }
        for _ in 0..<next(40) {
          let large = next(8) == 0
          let count = large ? Loop.copyLimit + 1 + next(100_000) : 1 + next(Loop.copyLimit)
          let bytes = patternBytes(count: count, seed: UInt32(expected.count))
          expected += bytes
          // A large one's storage is sometimes the array's own (`init(sharing:)`), the
          // array dropped here: the buffer keeps it.
          #expect(server.write(large && next(2) == 0 ? OutboundBuffer(sharing: bytes) : OutboundBuffer(bytes: bytes)))
        }
        if tick == 300 {
          ticker.close()
          client.startReading()
          server.shutdown()
        }
      }
    }
    fixture.runAndClose()
    #expect(received.count == expected.count)
    #expect(firstMismatch(received, expected) == nil)
    #expect(fixture.loop.stats.writeRequests > 0)
  }

  @Test("a copy chunk held by a uv_write in flight is not appended to: later small writes still arrive")
  func copyChunkInFlightIsNotAppendedTo() {
    let fixture = LoopFixture(timeoutMs: 20_000)
    var expected: [UInt8] = []
    var received: [UInt8] = []
    fixture.connectedPair { server, client in
      server.maxOutboundBytes = 1 << 30
      client.onRead = { received += $0 }
      // Small frames, each flushed at once, until the kernel refuses part of one:
      // the rest of that copy chunk then goes to a uv_write, which holds it.
      var frame = 0
      repeat {
        let bytes = patternBytes(count: Loop.copyLimit, seed: UInt32(frame))
        frame += 1
        expected += bytes
        #expect(server.write(OutboundBuffer(bytes: bytes)))
        server.flushNow()
      } while server.queuedBytes == 0 && frame < 1_000_000
      // More small frames while that write is in flight: they must not go into the
      // chunk it holds (libuv would not send them, and they would count as sent).
      for index in 0..<16 {
        let bytes = patternBytes(count: 100 + index, seed: UInt32(frame + index))
        expected += bytes
        #expect(server.write(OutboundBuffer(bytes: bytes)))
      }
      client.startReading()
      server.shutdown()
    }
    fixture.runAndClose()
    #expect(received.count == expected.count)
    #expect(firstMismatch(received, expected) == nil)
    #expect(fixture.loop.stats.writeRequests > 0)
    #expect(fixture.loop.stats.queuedBytes == 0)
  }

  @Test("a refused write keeps frame boundaries: discardUnsent drops only untouched buffers")
  func refusedWriteThenDiscard() {
    let fixture = LoopFixture(timeoutMs: 10_000)
    var refused = false
    var beforeRefusedWrite = -1
    var afterDiscard = -1
    fixture.connectedPair { server, client in
      client.stopReading()
      server.maxOutboundBytes = 64 * 1024
      let chunk = OutboundBuffer(bytes: patternBytes(count: 16 * 1024))
      for _ in 0..<8_192 where !refused {
        beforeRefusedWrite = server.queuedBytes
        refused = !server.write(chunk)
      }
      // What the kernel already started on stays; whole untouched buffers go,
      // the refused one included.
      let dropped = server.discardUnsent()
      afterDiscard = server.queuedBytes
      #expect(dropped > 0 && dropped % chunk.count == 0)
      #expect(dropped + afterDiscard == beforeRefusedWrite + chunk.count)
      server.close()
      client.close()
    }
    fixture.runAndClose()
    #expect(refused)
    #expect(afterDiscard < beforeRefusedWrite)
  }

  @Test("a head written with writeHead stays first: a control frame and discardUnsent go behind it")
  func headStaysAheadOfControlFrames() {
    let fixture = LoopFixture(timeoutMs: 10_000)
    let head = Array("HTTP/1.1 101 Switching Protocols\r\n\r\n".utf8)
    let frame: [UInt8] = [0x81, 0x01, 0x41]
    let ping: [UInt8] = [0x89, 0x00]
    var received: [UInt8] = []
    fixture.connectedPair { server, client in
      client.onRead = {
        received += $0
        if received.count >= head.count + frame.count + ping.count { client.close() }
      }
      client.startReading()
      #expect(server.writeHead(head))
      #expect(server.write(frame))  // shares the head's copy chunk
      server.writeControl(OutboundBuffer(bytes: ping))
      // Nothing may be dropped from the pinned chunk, nor the ping queued behind it.
      #expect(server.discardUnsent() == 0)
      server.shutdown()
    }
    fixture.runAndClose()
    #expect(received == head + frame + ping)
  }
}

@Suite("Outbound cap and large frames")
struct LargeFrameCapTests {
  @Test("a lone frame larger than the cap is accepted when nothing is queued ahead of it")
  func loneOversizeFrameIsAccepted() {
    let fixture = LoopFixture(timeoutMs: 10_000)
    var accepted = false
    var secondRefused = false
    fixture.connectedPair { server, client in
      client.stopReading()
      server.maxOutboundBytes = 64 * 1024
      // Far more than the kernel takes at once from a socket whose peer is not reading.
      let big = OutboundBuffer(bytes: patternBytes(count: 32 << 20))
      accepted = server.write(big)
      // Something is now queued ahead, so another write over the cap is refused.
      secondRefused = !server.write(OutboundBuffer(bytes: patternBytes(count: 1024)))
      server.close()
      client.close()
    }
    fixture.runAndClose()
    #expect(accepted)
    #expect(secondRefused)
  }
}

/// `Loop.beforeFlush` runs before any queued byte is flushed, and may keep the turn's
/// bytes from going out at all (`resetDirtyConnections`): the durable node writes its
/// records there, and resets the sockets when the disk refuses them
/// (RelayServer/DiskLog.swift).
@Suite struct BeforeFlushTests {
  @Test func runsBeforeTheTurnsBytesAreWritten() {
    let fixture = LoopFixture()
    var queuedAtHook: [Int] = []
    var received: [UInt8] = []
    fixture.connectedPair { server, client in
      fixture.loop.beforeFlush = { queuedAtHook.append(server.queuedBytes) }
      client.onRead = { bytes in
        received += bytes
        fixture.loop.beforeFlush = nil
        server.close()
        client.close()
      }
      client.startReading()
      server.write(Array("answer".utf8))
    }
    fixture.runAndClose()
    #expect(received == Array("answer".utf8))
    #expect(queuedAtHook.contains(6), "the hook ran while the bytes were still queued: \(queuedAtHook)")
  }

  @Test func resetDirtyConnectionsDropsTheTurnsBytesUnsent() {
    let fixture = LoopFixture()
    var received: [UInt8] = []
    var clientReason: CloseReason?
    fixture.connectedPair { server, client in
      fixture.loop.beforeFlush = {
        fixture.loop.beforeFlush = nil
        fixture.loop.resetDirtyConnections()
      }
      client.onRead = { received += $0 }
      client.onClose = { clientReason = $0 }
      client.startReading()
      server.write(Array("not on disk".utf8))
    }
    fixture.runAndClose()
    #expect(received.isEmpty)
    #expect(clientReason?.error == .connectionReset)
  }
}
