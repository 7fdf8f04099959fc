import EventLoop
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// What each loop turn reports (LoopTurns.swift): busy time, and the loop thread's CPU
/// time in it, so a turn that waited for a core is told from one that worked.
@Suite struct LoopTurnsTests {
  private static func threadCpuMs() -> Double {
    var spec = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec)
    return Double(spec.tv_sec) * 1e3 + Double(spec.tv_nsec) / 1e6
  }

  @Test func aTurnThatWaitsIsBusyButCostsNoCpu() {
    let fixture = LoopFixture()
    let loop = fixture.loop
    var turns: [(busyMs: Double, cpuMs: Double)] = []
    loop.onTurn = { busy, cpu in turns.append((Double(busy) / 1e6, Double(cpu) / 1e6)) }
    let waits = EventLoop.Timer(loop: loop)
    let works = EventLoop.Timer(loop: loop)
    // The thread is off the CPU for 40 ms (as when the process waits for a core):
    // the fault this test simulates, not a synchronisation.
    waits.start(afterMs: 1) {
      usleep(40_000)
      waits.close()
      works.start(afterMs: 1) {
        let start = Self.threadCpuMs()
        while Self.threadCpuMs() - start < 40 {}  // 40 ms of the thread's own CPU
        works.close()
      }
    }
    fixture.runAndClose()
    #expect(turns.contains { $0.busyMs >= 40 && $0.cpuMs < 20 }, "\(turns)")
    #expect(turns.contains { $0.busyMs >= 40 && $0.cpuMs >= 40 }, "\(turns)")
    #expect(Double(loop.longestTurnCpuNs) / 1e6 >= 40)
  }
}
