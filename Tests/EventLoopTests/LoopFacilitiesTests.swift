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
    oneShot.start(afterMs: 5) { oneShotFires += 1 }
    repeating.start(afterMs: 1, repeatMs: 2) {
      repeatFires += 1
      if repeatFires == 5 { repeating.stop() }
    }
    stopped.start(afterMs: 3) { stoppedFires += 1 }
    stopped.stop()
    let end = EventLoop.Timer(loop: loop)
    end.start(afterMs: 40) {
      oneShot.close()
      repeating.close()
      stopped.close()
      end.close()
    }
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

  @Test("Loop.close() closes handles the test left open")
  func closeSweepsOpenHandles() {
    let loop = Loop()
    let timer = EventLoop.Timer(loop: loop)
    timer.start(afterMs: 10_000) {}
    let listener = try! TCPListener(loop: loop, host: "127.0.0.1", port: 0)
    try! listener.listen { _ in }
    var closeReason: CloseReason?
    TCPConnector.connect(loop: loop, host: "127.0.0.1", port: listener.port) { result in
      guard case .success(let client) = result else { return }
      client.onClose = { closeReason = $0 }
      loop.stop()
    }
    loop.run()
    loop.close()
    #expect(closeReason?.isLocal == true)
  }
}
