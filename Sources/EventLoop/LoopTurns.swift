// How long each loop turn works, and how late the loop reads what arrived meanwhile.
// A turn is everything between two prepare phases except the time blocked in the
// poll (libuv's idle-time metric, `docs/src/metrics.rst`): timers, I/O callbacks,
// checks, closes. While a turn works, nothing is read; bytes that arrived then are
// read by the next turn, and a client's messages that were spread out arrive bunched.
import CLibUV

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The state of the turn measurement, one per loop.
struct TurnClock {
  /// `uv_hrtime` and `uv_metrics_idle_time` at the end of the last turn.
  var endedNs: UInt64 = 0
  /// The thread's CPU time at the end of the last turn (`currentTurnCpuNs`).
  var endedCpuNs: UInt64 = 0
  var idleNs: UInt64 = 0
  /// Busy time of the last completed turn.
  var lastBusyNs: UInt64 = 0
  /// The longest turn so far.
  var maxBusyNs: UInt64 = 0
  /// The most CPU time the loop thread spent in one turn so far.
  var maxCpuNs: UInt64 = 0
  /// Loop time (`uv_now`) by which the poll must have returned: the next timer's due
  /// time when the turn ended. Later than that, the process did not run (stopped,
  /// starved of CPU) even though a timer was due.
  var pollDeadlineMs: Int64 = .max
  /// How far the last wait overslept `pollDeadlineMs`, measured when the turn after
  /// it ended. Carried into the next poll: a wait a stop signal interrupted (EINTR
  /// after SIGCONT, `man 7 signal`) returns without reading, and the backlog is read
  /// one turn later, after the deadline was set afresh.
  var carriedLatenessMs: Int64 = 0
}

extension Loop {
  /// Called at the end of each turn with its busy time and the loop thread's CPU time
  /// in it, in nanoseconds. Busy time longer than CPU time is time the thread waited
  /// for a core (shared cores, or the process's own thread pool on the same core).
  public typealias TurnObserver = (_ busyNs: UInt64, _ cpuNs: UInt64) -> Void

  /// Ends a turn: measures it and reports it to `onTurn`.
  func turnEnded() {
    let nowNs = uv_hrtime()
    let idleNs = uv_metrics_idle_time(rawLoop)
    let cpuNs = Self.threadCpuNs()
    if turns.endedNs > 0 {
      let elapsed = nowNs &- turns.endedNs
      let idle = idleNs &- turns.idleNs
      let busy = elapsed > idle ? elapsed - idle : 0
      let cpu = cpuNs > turns.endedCpuNs ? cpuNs - turns.endedCpuNs : 0
      turns.lastBusyNs = busy
      turns.maxBusyNs = max(turns.maxBusyNs, busy)
      turns.maxCpuNs = max(turns.maxCpuNs, cpu)
      onTurn?(busy, cpu)
    }
    turns.endedNs = nowNs
    turns.idleNs = idleNs
    turns.endedCpuNs = cpuNs
    let loopNowMs = Int64(uv_now(rawLoop))
    turns.carriedLatenessMs = turns.pollDeadlineMs == .max ? 0 : max(0, loopNowMs - turns.pollDeadlineMs)
    let timeout = uv_backend_timeout(rawLoop)
    turns.pollDeadlineMs = timeout >= 0 ? loopNowMs + Int64(timeout) : .max
  }

  /// Busy time of the turn in progress so far, in nanoseconds (0 before the first
  /// turn ended). Takes libuv's metrics lock: cheap, but not free.
  public var currentTurnBusyNs: UInt64 {
    guard turns.endedNs > 0 else { return 0 }
    let elapsed = uv_hrtime() &- turns.endedNs
    let idle = uv_metrics_idle_time(rawLoop) &- turns.idleNs
    return elapsed > idle ? elapsed - idle : 0
  }

  /// CPU time this thread spent in the turn in progress so far, in nanoseconds: the
  /// work the loop did, without the time the process waited for a core. A budget
  /// of work per turn must use this, not `currentTurnBusyNs`: on a machine whose
  /// cores are shared, wall-clock time runs on while the process is not scheduled,
  /// a wall-clock budget is spent after a handful of reads, and every turn's fixed
  /// cost (the cork's flush of every connection written to) is paid again for
  /// each handful.
  public var currentTurnCpuNs: UInt64 {
    guard turns.endedNs > 0 else { return 0 }  // as currentTurnBusyNs: no turn measured yet
    let now = Self.threadCpuNs()
    return now > turns.endedCpuNs ? now - turns.endedCpuNs : 0
  }

  /// `CLOCK_THREAD_CPUTIME_ID` in nanoseconds: the calling thread's CPU time.
  public static func threadCpuNs() -> UInt64 {
    var spec = timespec()
    guard clock_gettime(CLOCK_THREAD_CPUTIME_ID, &spec) == 0 else { return 0 }
    return UInt64(spec.tv_sec) &* 1_000_000_000 &+ UInt64(spec.tv_nsec)
  }

  /// The longest turn measured so far, in nanoseconds.
  public var longestTurnNs: UInt64 { turns.maxBusyNs }
  /// The most CPU time of the loop thread in one turn so far, in nanoseconds.
  public var longestTurnCpuNs: UInt64 { turns.maxCpuNs }

  /// How long before `nowMs` what is read now may have arrived because the loop was
  /// not reading: the last turn's busy time, or how far the poll overslept its
  /// deadline (the process was stopped or starved), now or in the wait before the
  /// last turn (`carriedLatenessMs`). 0 on a loop that keeps up.
  public var readLatenessMs: Int64 {
    let overslept = turns.pollDeadlineMs == .max ? 0 : Int64(uv_now(rawLoop)) - turns.pollDeadlineMs
    return max(0, Int64(turns.lastBusyNs / 1_000_000), overslept, turns.carriedLatenessMs)
  }
}
