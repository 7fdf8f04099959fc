#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import EventLoop
import Testing

/// `Loop.offload`: the work runs on libuv's thread pool, its completion on the loop
/// thread with the work's result, exactly once; the pending request keeps the loop
/// running and is freed (the fixture's `uv_loop_close` check fails on a leak).
@Suite("Work off the loop thread")
struct OffloadTests {
  @Test("work runs on a pool thread, the completion on the loop thread with its result")
  func workOffTheLoop() {
    let fixture = LoopFixture()
    let loopThread = pthread_self()
    var results: [Int: (onLoop: Bool, workOnLoop: Bool)] = [:]
    for n in 0..<8 {
      fixture.loop.offload({ () -> (Int, pthread_t) in (n * n, pthread_self()) }) { value in
        #expect(value.0 == n * n)
        let here = pthread_equal(pthread_self(), loopThread) != 0
        #expect(results[n] == nil, "a completion ran twice")
        results[n] = (here, pthread_equal(value.1, loopThread) != 0)
      }
    }
    // Nothing completes inside offload: the work is queued, not run here.
    #expect(results.isEmpty)
    fixture.runAndClose()
    #expect(results.count == 8)
    #expect(results.values.allSatisfy { $0.onLoop && !$0.workOnLoop })
  }

  /// Offloaded work yields the core to event loops: its pool thread runs at a higher
  /// nice value; the loop thread keeps its own.
  @Test("offloaded work runs at background priority, the loop thread at its own")
  func workRunsAtBackgroundPriority() {
    let fixture = LoopFixture()
    let before = Loop.threadNice()
    var seen: Int32?
    fixture.loop.offload({ Loop.threadNice() }) { seen = $0 }
    fixture.runAndClose()
    #expect(seen.map { $0 >= Loop.backgroundNice } == true, "pool thread nice \(String(describing: seen))")
    #expect(Loop.threadNice() == before)
  }

  /// `Loop.release`: the value's last reference goes on a pool thread, so its deinit
  /// (a big buffer's free) runs there; a `Handoff` gives its value once.
  @Test("a released value is freed on a pool thread; a handoff gives its value once")
  func releaseFreesOffTheLoop() {
    let fixture = LoopFixture()
    let loopThread = pthread_self()
    let freed = FreedOn()
    let box = Handoff(Tracked(freed))
    fixture.loop.release(box)
    fixture.runAndClose()
    #expect(freed.thread.map { pthread_equal($0, loopThread) == 0 } == true, "freed on the loop thread, or never")
    #expect(box.take() == nil)
    let once = Handoff(7)
    #expect(once.take() == 7)
    #expect(once.take() == nil)
  }

  /// `HeapGauge`: a sample runs off the loop and its figures reach the loop; one at a time.
  @Test("the heap gauge samples on the pool, one sample at a time")
  func heapGaugeSamplesOffTheLoop() {
    let fixture = LoopFixture()
    let gauge = HeapGauge()
    gauge.sample(on: fixture.loop, trimAboveBytes: Int.max)
    gauge.sample(on: fixture.loop, trimAboveBytes: Int.max)  // one is under way: ignored
    #expect(gauge.samples == 0)
    fixture.runAndClose()
    #expect(gauge.samples == 1)
    #expect(gauge.inUse > 0)
    #expect(gauge.trims == 0)
  }
}

private final class FreedOn: @unchecked Sendable {
  var thread: pthread_t?
}

/// Records the thread its deinit runs on.
private final class Tracked: Sendable {
  let freed: FreedOn
  init(_ freed: FreedOn) { self.freed = freed }
  deinit { freed.thread = pthread_self() }
}
