import CLibUV
import CRelayShims

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Counters for tests and metrics. Plain integers updated on the loop thread.
public struct LoopStats: Sendable {
  /// Connection flushes that found bytes to write (one per dirty connection per turn).
  public var flushes: UInt64 = 0
  /// `uv_try_write` calls (each is one `writev`, gathering up to `Loop.maxGatherBuffers`).
  public var tryWriteCalls: UInt64 = 0
  /// `uv_write` requests issued for bytes `uv_try_write` could not write at once.
  public var writeRequests: UInt64 = 0
  /// Bytes the kernel accepted.
  public var bytesWritten: UInt64 = 0
  /// Bytes delivered to `onRead` callbacks.
  public var bytesRead: UInt64 = 0
  /// Connection flushes left for a later turn because a flush pass spent
  /// `Loop.flushBudgetNs` (each counted once per pass it waited).
  public var flushesDeferred: UInt64 = 0
  /// Bytes queued for writing on all connections and not yet taken by the kernel
  /// (the sum of every `TCPConnection.queuedBytes`; a buffer shared by several
  /// queues counts once per queue).
  public var queuedBytes = 0

  /// All counters zero.
  public init() {}
}

/// One libuv event loop (its own heap-allocated `uv_loop_t`) and the loop-wide state
/// of the hot path: one read buffer, one iovec scratch array, the "cork" that flushes
/// every connection written during a turn once, and the linger queue bounding
/// graceful closes.
///
/// Single-threaded: every method must be called on the thread running the loop.
/// Only `AsyncWakeupSender` crosses threads (`docs/src/design.rst`, `async.rst`).
/// Call `close()` before dropping the last reference.
public final class Loop {
  /// Size of the one loop-wide read buffer handed out by every alloc callback. Reads
  /// are parsed synchronously, so one buffer serves every connection (uSockets keeps
  /// one per loop); 64 KiB matches a typical socket receive batch.
  public static let readBufferSize = 64 * 1024
  /// Maximum iovecs gathered into one `uv_try_write` / `uv_write`: Linux `IOV_MAX`.
  public static let maxGatherBuffers = 1024
  /// Most bytes one `uv_write` request carries; `uv_try_write` is not bounded.
  public static let maxInFlightBytes = 64 * 1024
  /// A flush of several queued buffers adding up to at most this many bytes copies
  /// them into one contiguous buffer and writes that (`write`), instead of handing
  /// the kernel an iovec per buffer (`writev`): on loopback the kernel's per-iovec
  /// work costs more than the copy of a few small frames. Larger batches keep the
  /// shared buffers (no copy). The figures that chose it: Benchmarks/results/.
  public static let coalesceLimit = 16 * 1024
  /// A buffer of at most this many bytes is copied into the connection's copy chunk
  /// when written, instead of being queued by reference: a fan-out of small frames
  /// then costs a copy per delivery, where a shared buffer costs two atomic
  /// reference-count operations, a queue entry to gather and one to drop, and the
  /// flush still copied the frames into `coalesceBuffer` to write them in one piece.
  /// A connection's frames of a turn are then already contiguous: one chunk, one
  /// `write`. Larger buffers stay shared (no copy per recipient).
  public static let copyLimit = 512
  /// Size of one copy chunk: room for the small frames of a turn (a fan-out of
  /// ~120-byte events with 8 in flight writes ~960 bytes per connection per turn);
  /// the chunks a loop keeps (`chunkPool`) are a fixed cost of the process, so they
  /// stay small.
  public static let copyChunkBytes = 1024

  let rawLoop: UnsafeMutablePointer<uv_loop_t>
  let readBuffer: UnsafeMutableRawPointer
  /// Scratch `uv_buf_t` array reused by every flush; libuv copies the array in
  /// `uv_write` (`src/unix/stream.c`), so it is free again when the call returns.
  let gatherBuffers: UnsafeMutablePointer<uv_buf_t>
  /// Where a flush of small buffers is made contiguous (see `coalesceLimit`); only
  /// within one flush, never across a callback.
  let coalesceBuffer: UnsafeMutableRawPointer
  private let prepareHandle: UnsafeMutablePointer<uv_prepare_t>
  private let checkHandle: UnsafeMutablePointer<uv_check_t>
  /// Active only while dirty connections wait for a later flush pass: an active idle
  /// handle makes the poll return at once (`docs/src/idle.rst`), so they are not
  /// kept waiting for unrelated I/O.
  private let idleHandle: UnsafeMutablePointer<uv_idle_t>
  private var idleActive = false
  private let lingerTimer: UnsafeMutablePointer<uv_timer_t>
  /// Connections with bytes queued since the last flush, each listed once. A
  /// `RingBuffer` held by `let` rather than an `Array` property, whose dynamic
  /// exclusivity checks would cost more than the append itself.
  private let dirtyConnections = RingBuffer<TCPConnection>(initialCapacity: 1024)
  /// Connections to flush first in the next pass, outside its budget (`flushFirst`);
  /// each is also in `dirtyConnections`.
  private let urgentConnections = RingBuffer<TCPConnection>(initialCapacity: 64)
  /// Connections in a graceful close, oldest first; see `lingerTimeoutMs`.
  private let lingerQueue = RingBuffer<(deadlineMs: UInt64, connection: TCPConnection)>()
  /// Spare write-queue rings (see `WriteQueue`): enough for a turn that queues several
  /// frames to a thousand connections; about 200 KB when full.
  let ringPool = RingPool(limit: 1_024)
  /// Copy chunks (see `copyLimit`): one per connection written in a turn, so a
  /// thousand-connection fan-out reuses them; at most 1 MiB, allocated once.
  let chunkPool = ChunkPool(limit: 1_024)
  /// Upper bound on a graceful close (`shutdown()` or a peer's EOF with data still
  /// queued): flush, half-close and wait for the peer's EOF, then close regardless.
  /// Every deadline is now + this constant, so the FIFO queue is sorted by deadline
  /// and one timer serves every lingering connection.
  public let lingerTimeoutMs: UInt64
  /// Counters; see `LoopStats`. Inlinable: servers read `stats.queuedBytes` after
  /// every write (an outbound budget), where a call copying the whole struct cost
  /// more than the comparison.
  @inlinable public var stats: LoopStats { statistics }
  /// Internal storage of `stats`, so hot-path increments need no dynamic exclusivity
  /// check (see `TCPConnection.queuedByteCount`).
  @usableFromInline var statistics = LoopStats()
  private var isClosed = false
  /// Turn measurement (LoopTurns.swift).
  var turns = TurnClock()
  /// Receives every turn's busy time (ns), e.g. for a histogram (LoopTurns.swift).
  public var onTurn: TurnObserver?
  /// Runs once per turn just before the cork's last flush (prepare phase), for output
  /// the application gathers over a whole turn.
  public var beforeCork: (() -> Void)?
  /// Runs at the start of each of a turn's two flush passes (check and prepare), before
  /// any connection is flushed: for a write that must reach the kernel before anything
  /// the turn queued to a socket (the durable node's records, RelayServer/DiskLog.swift).
  public var beforeFlush: (() -> Void)?
  /// Most CPU time one flush pass of the cork spends (0 = no bound). The connections it
  /// did not reach stay listed, in order, and go first in the next pass: a fan-out to
  /// thousands of members cannot hold the loop in `write` every turn, the rest of the
  /// loop (reads, timers, other connections' replies) gets its turn, and a connection
  /// that waits gathers the frames of several turns into one write.
  public var flushBudgetNs: UInt64 = 0
  /// Inside `run()` / `runOnce()`: `close()` must not re-enter `uv_run` from a callback.
  private var isRunning = false

  /// Creates a loop and its internal handles and ignores `SIGPIPE`, so writes to a
  /// vanished peer fail with `EPIPE` instead of killing the process.
  public init(lingerTimeoutMs: UInt64 = 2_000) {
    _ = signal(SIGPIPE, SIG_IGN)
    self.lingerTimeoutMs = lingerTimeoutMs
    rawLoop = .allocate(capacity: 1)
    readBuffer = .allocate(byteCount: Self.readBufferSize, alignment: 16)
    gatherBuffers = .allocate(capacity: Self.maxGatherBuffers)
    coalesceBuffer = .allocate(byteCount: Self.coalesceLimit, alignment: 16)
    prepareHandle = .allocate(capacity: 1)
    checkHandle = .allocate(capacity: 1)
    idleHandle = .allocate(capacity: 1)
    lingerTimer = .allocate(capacity: 1)
    preconditionLibUVSucceeded(uv_loop_init(rawLoop), "uv_loop_init")
    preconditionLibUVSucceeded(relay_loop_measure_idle_time(rawLoop), "uv_loop_configure(UV_METRICS_IDLE_TIME)")
    // Unretained: the Loop outlives its uv_loop_t, which close() frees.
    rawLoop.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    startInternalHandles()
  }

  deinit {
    precondition(isClosed, "Loop dropped without close(): its handles would leak")
  }

  /// The cork: flush dirty connections before the loop may block (prepare) and
  /// after I/O callbacks ran (check), so bytes written from any callback phase go
  /// out in the same turn (uSockets' libuv back end hooks the same two phases).
  /// Both are unreferenced so they never keep `run()` alive on their own.
  private func startInternalHandles() {
    uv_prepare_init(rawLoop, prepareHandle)
    uv_check_init(rawLoop, checkHandle)
    uv_idle_init(rawLoop, idleHandle)
    uv_timer_init(rawLoop, lingerTimer)
    preconditionLibUVSucceeded(uv_prepare_start(prepareHandle, prepareFlushCallback), "uv_prepare_start")
    preconditionLibUVSucceeded(uv_check_start(checkHandle, checkFlushCallback), "uv_check_start")
    uv_unref(prepareHandle.cast())
    uv_unref(checkHandle.cast())
    uv_unref(idleHandle.cast())
    uv_unref(lingerTimer.cast())
  }

  /// Runs (`UV_RUN_DEFAULT`) until `stop()` or until no referenced handle or request
  /// is active.
  public func run() {
    precondition(!isClosed, "run() on a closed Loop")
    precondition(!isRunning, "run() re-entered from a loop callback")
    isRunning = true
    defer { isRunning = false }
    _ = uv_run(rawLoop, UV_RUN_DEFAULT)
  }

  /// Runs one iteration: polls without blocking when `nowait`, else blocks for I/O once.
  public func runOnce(nowait: Bool) {
    precondition(!isClosed, "runOnce() on a closed Loop")
    precondition(!isRunning, "runOnce() re-entered from a loop callback")
    isRunning = true
    defer { isRunning = false }
    _ = uv_run(rawLoop, nowait ? UV_RUN_NOWAIT : UV_RUN_ONCE)
  }

  /// Makes `run()` return after the current iteration.
  public func stop() {
    uv_stop(rawLoop)
  }

  /// The loop's cached monotonic time in milliseconds (`uv_now`), updated at the
  /// start of each iteration (`docs/src/loop.rst`); feed this to the core as `now`.
  public var nowMs: UInt64 { uv_now(rawLoop) }

  /// Refreshes the cached `nowMs` (`uv_update_time`).
  public func updateTime() {
    uv_update_time(rawLoop)
  }

  /// Monotonic high-resolution time in nanoseconds (`uv_hrtime`). Never mix with `nowMs`.
  public static func hrtimeNs() -> UInt64 {
    uv_hrtime()
  }

  /// Wall-clock Unix time in milliseconds (`uv_gettimeofday`), for logs and tokens only.
  public static func wallClockMs() -> Int64 {
    var time = uv_timeval64_t()
    preconditionLibUVSucceeded(uv_gettimeofday(&time), "uv_gettimeofday")
    return time.tv_sec * 1_000 + Int64(time.tv_usec / 1_000)
  }

  /// Raises the soft `RLIMIT_NOFILE` towards `target`, capped at the hard limit, and
  /// returns the soft limit in force afterwards (-1 if it cannot be read). Never
  /// lowers it. Each connection costs one descriptor.
  public static func raiseOpenFileLimit(to target: Int) -> Int {
    var limit = rlimit()
    guard getrlimit(resourceNoFile, &limit) == 0 else { return -1 }
    let wanted = min(rlim_t(max(target, 0)), limit.rlim_max)
    if wanted > limit.rlim_cur {
      var raised = limit
      raised.rlim_cur = wanted
      if setrlimit(resourceNoFile, &raised) == 0 { limit = raised }
    }
    return limit.rlim_cur >= rlim_t(Int.max) ? Int.max : Int(limit.rlim_cur)
  }

  /// Closes every remaining handle (`uv_walk`, then each owner's `close()`), runs until all close
  /// callbacks have run (connections report `onClose` here), then `uv_loop_close`,
  /// which must succeed: anything else means a handle or request leaked (the
  /// `MAKE_VALGRIND_HAPPY` check of libuv's own tests).
  ///
  /// Handles created by other libraries on this loop must be closed by their owners
  /// first: the walk skips handles already closing and traps on an open handle it
  /// does not own.
  public func close() {
    precondition(!isClosed, "Loop.close() called twice")
    precondition(!isRunning, "Loop.close() called from a loop callback; stop() and close after run() returns")
    uv_close(prepareHandle.cast(), nil)
    uv_close(checkHandle.cast(), nil)
    uv_close(idleHandle.cast(), nil)
    uv_close(lingerTimer.cast(), nil)
    lingerQueue.removeAll()
    var result = UV_EBUSY.rawValue
    // Close callbacks run user code that may open new handles; retry a few times.
    for _ in 0..<4 where result != 0 {
      uv_walk(rawLoop, walkCloseCallback, nil)
      _ = uv_run(rawLoop, UV_RUN_DEFAULT)
      result = uv_loop_close(rawLoop)
    }
    precondition(result == 0, "uv_loop_close: \(LoopError(code: result)) (leaked handle or request)")
    dirtyConnections.removeAll()
    urgentConnections.removeAll()
    isClosed = true
    freeMemory()
  }

  private func freeMemory() {
    prepareHandle.deallocate()
    checkHandle.deallocate()
    idleHandle.deallocate()
    lingerTimer.deallocate()
    gatherBuffers.deallocate()
    coalesceBuffer.deallocate()
    readBuffer.deallocate()
    rawLoop.deallocate()
  }
}

@available(*, unavailable)
extension Loop: Sendable {}

#if canImport(Glibc)
  private let resourceNoFile = __rlimit_resource_t(RLIMIT_NOFILE.rawValue)
#else
  private let resourceNoFile = RLIMIT_NOFILE
#endif

/// `uv_walk_cb` for `Loop.close()`: asks the owner of each handle not already
/// closing to close it, so the owner's own state machine records the close.
private func walkCloseCallback(_ handle: UnsafeMutablePointer<uv_handle_t>?, _: UnsafeMutableRawPointer?) {
  guard let handle, uv_is_closing(handle) == 0, let data = handle.pointee.data else { return }
  guard let owner = Unmanaged<AnyObject>.fromOpaque(data).takeUnretainedValue() as? any HandleOwner else {
    preconditionFailure("Loop.close(): an open handle without an EventLoop owner")
  }
  owner.close()
}

/// The `uv_prepare_cb` of the cork, which also ends a turn's measurement (LoopTurns.swift).
private func prepareFlushCallback(_ handle: UnsafeMutablePointer<uv_prepare_t>?) {
  guard let handle else { return }
  let loop = unretainedOwner(handle.pointee.loop.pointee.data, as: Loop.self)
  loop.beforeFlush?()
  loop.beforeCork?()
  loop.flushDirtyConnections()
  loop.turnEnded()
}

/// `uv_idle_cb`: nothing to do; being active keeps the poll from blocking.
private func idleCallback(_: UnsafeMutablePointer<uv_idle_t>?) {}

/// The `uv_check_cb` of the cork.
private func checkFlushCallback(_ handle: UnsafeMutablePointer<uv_check_t>?) {
  guard let handle else { return }
  let loop = unretainedOwner(handle.pointee.loop.pointee.data, as: Loop.self)
  loop.beforeFlush?()
  if loop.flushBudgetNs > 0 { loop.flushUrgentConnections() } else { loop.flushDirtyConnections() }
}

extension Loop {
  /// Flushes every connection written to since the last flush, oldest first; those
  /// dirtied during the pass are flushed in the same pass. Past `flushBudgetNs` the
  /// rest wait for the next pass, still first in line (round robin: the pass after
  /// begins where this one stopped).
  func flushUrgentConnections() {
    while !urgentConnections.isEmpty { urgentConnections.removeFirst().flushPending() }
  }

  func flushDirtyConnections() {
    guard !dirtyConnections.isEmpty else { return }
    flushUrgentConnections()
    let budget = flushBudgetNs
    let started = budget > 0 ? Self.threadCpuNs() : 0
    var flushed = 0
    while !dirtyConnections.isEmpty {
      dirtyConnections.removeFirst().flushPending()
      flushed &+= 1
      // CPU time (see currentTurnCpuNs), read every 32 flushes: a flush is a few
      // microseconds.
      if budget > 0, flushed & 31 == 0, Self.threadCpuNs() &- started >= budget { break }
    }
    if dirtyConnections.isEmpty {
      noneDirty()
    } else {
      statistics.flushesDeferred &+= UInt64(dirtyConnections.count)
      if !idleActive {
        idleActive = true
        uv_idle_start(idleHandle, idleCallback)
      }
    }
  }

  /// Resets (`TCPConnection.reset`) every connection with bytes queued since the last
  /// flush, before they go out: what they hold must not reach the peers (the durable
  /// node's answers to records the disk refused). Their queues are dropped unsent.
  public func resetDirtyConnections() {
    while !dirtyConnections.isEmpty {
      let connection = dirtyConnections.removeFirst()
      connection.isDirty = false
      connection.reset()
    }
    urgentConnections.removeAll()
    noneDirty()
  }

  /// Nothing waits for a flush: the loop may end, and the poll may block.
  private func noneDirty() {
    uv_unref(prepareHandle.cast())
    if idleActive {
      idleActive = false
      uv_idle_stop(idleHandle)
    }
  }

  /// Lists `connection` (already listed as dirty) for the head of the next pass.
  func addUrgentConnection(_ connection: TCPConnection) {
    urgentConnections.append(connection)
  }

  /// Lists `connection` for the end-of-turn flush. While the list is non-empty the
  /// prepare handle is referenced, so the loop stays alive for one more iteration
  /// and flushes bytes written where the check phase has already passed (close
  /// callbacks, or before `run()`), instead of exiting with them queued.
  func addDirtyConnection(_ connection: TCPConnection) {
    if dirtyConnections.isEmpty { uv_ref(prepareHandle.cast()) }
    dirtyConnections.append(connection)
  }

  /// Puts `connection` in the linger queue with a deadline `lingerTimeoutMs` from now.
  func registerLinger(_ connection: TCPConnection) {
    let wasEmpty = lingerQueue.isEmpty
    lingerQueue.append((uv_now(rawLoop) + lingerTimeoutMs, connection))
    if wasEmpty { armLingerTimer() }
  }

  private func armLingerTimer() {
    // The timer is already closing during Loop.close(); every connection closes then anyway.
    guard !lingerQueue.isEmpty, uv_is_closing(lingerTimer.cast()) == 0 else { return }
    let deadline = lingerQueue.front.pointee.deadlineMs
    let now = uv_now(rawLoop)
    let delay = deadline > now ? deadline - now : 0
    preconditionLibUVSucceeded(uv_timer_start(lingerTimer, lingerTimerCallback, delay, 0), "uv_timer_start")
  }

  /// Closes every connection whose linger deadline passed. Entries of connections
  /// that closed earlier are simply dropped here (lazy deletion).
  fileprivate func expireLingeringConnections() {
    let now = uv_now(rawLoop)
    while !lingerQueue.isEmpty, lingerQueue.front.pointee.deadlineMs <= now {
      lingerQueue.removeFirst().connection.lingerDidExpire()
    }
    armLingerTimer()
  }
}

private func lingerTimerCallback(_ timer: UnsafeMutablePointer<uv_timer_t>?) {
  guard let timer else { return }
  unretainedOwner(timer.pointee.loop.pointee.data, as: Loop.self).expireLingeringConnections()
}
