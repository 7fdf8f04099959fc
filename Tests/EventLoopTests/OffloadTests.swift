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
}
