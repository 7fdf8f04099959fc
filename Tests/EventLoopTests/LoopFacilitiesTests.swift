import EventLoop
import Testing

#if canImport(Glibc)
  import Glibc
#endif
import Foundation

@Suite("Timers, signals, async wakeups and loop utilities")
struct LoopFacilitiesTests {
  @Test("one-shot, repeating and stopped timers")
  func timers() {
    let fixture = LoopFixture()
    let loop = fixture.loop
    var oneShotFires = 0
    var repeatFires = 0
    var stoppedFires = 0
    let oneShot = EventLoop.Timer(loop: loop)
    let repeating = EventLoop.Timer(loop: loop)
    let stopped = EventLoop.Timer(loop: loop)
    // Event-driven end (no fixed deadline, which a loaded machine can overrun): once
    // both timers are done, linger one more one-shot so a stray fire would be seen.
    let finishWhenDone = {
      guard oneShotFires == 1, repeatFires == 5 else { return }
      oneShot.start(afterMs: 10) {
        oneShot.close()
        repeating.close()
        stopped.close()
      }
    }
    oneShot.start(afterMs: 5) {
      oneShotFires += 1
      finishWhenDone()
    }
    repeating.start(afterMs: 1, repeatMs: 2) {
      repeatFires += 1
      if repeatFires == 5 {
        repeating.stop()
        finishWhenDone()
      }
    }
    stopped.start(afterMs: 3) { stoppedFires += 1 }
    stopped.stop()
    fixture.runAndClose()
    #expect(oneShotFires == 1)
    #expect(repeatFires == 5)
    #expect(stoppedFires == 0)
  }

  @Test("signal watcher sees SIGUSR1 raised by this process")
  func signalWatcher() {
    let fixture = LoopFixture()
    var deliveries = 0
    let watcher = SignalWatcher(loop: fixture.loop, signal: SIGUSR1) { deliveries += 1 }
    let trigger = EventLoop.Timer(loop: fixture.loop)
    trigger.start(afterMs: 1) {
      kill(getpid(), SIGUSR1)
      trigger.close()
    }
    let poll = EventLoop.Timer(loop: fixture.loop)
    poll.start(afterMs: 2, repeatMs: 2) {
      guard deliveries > 0 else { return }
      watcher.close()
      poll.close()
    }
    fixture.runAndClose()
    #expect(deliveries >= 1)
  }

  @Test("async wakeup from another thread runs the callback on the loop")
  func asyncWakeupFromAnotherThread() {
    let fixture = LoopFixture()
    var wakeups = 0
    var wakeup: AsyncWakeup?
    wakeup = AsyncWakeup(loop: fixture.loop) {
      wakeups += 1
      wakeup?.close()
    }
    let sender = wakeup!.sender
    let sentFromThread = Thread { sender.send() }
    sentFromThread.start()
    fixture.runAndClose()
    #expect(wakeups == 1)
    #expect(sender.send() == false)
  }

  @Test("clocks and the open-file limit")
  func clocksAndLimits() {
    let fixture = LoopFixture()
    let first = Loop.hrtimeNs()
    let second = Loop.hrtimeNs()
    #expect(second >= first)
    #expect(Loop.wallClockMs() > 1_600_000_000_000)
    let before = fixture.loop.nowMs
    fixture.loop.updateTime()
    #expect(fixture.loop.nowMs >= before)
    let limit = Loop.raiseOpenFileLimit(to: 4_096)
    #expect(limit >= 256)
    #expect(Loop.raiseOpenFileLimit(to: 16) == limit)
    fixture.runAndClose()
  }

  @Test("Loop.close() closes handles left open; onClose may close other handles")
  func closeSweepsOpenHandles() {
    let loop = Loop()
    let timer = EventLoop.Timer(loop: loop)
    timer.start(afterMs: 10_000) {}
    let listener = try! TCPListener(loop: loop, host: "127.0.0.1", port: 0)
    var server: TCPConnection?
    var client: TCPConnection?
    var reasons: [CloseReason] = []
    let stopWhenConnected = {
      if server != nil && client != nil { loop.stop() }
    }
    try! listener.listen { accepted in
      server = accepted
      accepted.onClose = { reasons.append($0) }
      stopWhenConnected()
    }
    TCPConnector.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
      guard case .success(let connection) = result else { return }
      client = connection
      connection.onClose = { reason in
        reasons.append(reason)
        // During the sweep, closing handles the sweep already closed must be a no-op.
        server?.close()
        listener.close()
        timer.close()
        #expect(server?.write([1]) == false)
      }
      stopWhenConnected()
    }
    loop.run()
    loop.close()
    #expect(reasons.count == 2)
    #expect(reasons.allSatisfy { $0.isLocal })
    #expect(client?.isClosed == true && server?.isClosed == true)
  }
}
