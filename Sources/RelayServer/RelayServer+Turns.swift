// No loop turn carries an input storm alone (protocol/ §16, `relay_loop_turn_seconds`).
// libuv delivers, in one poll phase, a read for every ready socket (batches of 1 024,
// repeated while full): a thousand members re-joining at once would all be answered
// in one turn, timers and /metrics waiting behind them. Once a turn has been busy for
// `turnReadBudgetMs`, a read is not handled but kept (one read, at most 64 KiB, per
// connection) and its connection stops reading: the next bytes wait in the kernel
// (TCP flow control). A 1 ms timer hands the kept reads back in arrival order, each
// timer turn again only until the budget, so timers, the flush and new I/O get turns
// in between. Past `maxDeferredReadBytes` kept, reads are handled at once again.
// The same keeping is the cluster's backpressure: while the input log is backed up
// (InputLog.isBackedUp) every read is kept, and the kept ones wait for it to drain.
import EventLoop

/// Reads kept for a later turn, oldest first.
final class DeferredReads {
  var queue: [(conn: ServerConnection, bytes: [UInt8])] = []
  var head = 0
  var bytes = 0
  var deferred: UInt64 = 0
  var timer: EventLoop.Timer?

  var isEmpty: Bool { head == queue.count }
}

extension RelayServer {
  /// Whether a read arriving now waits for a later turn (`readDeferred` then keeps it).
  func shouldDeferRead() -> Bool {
    guard deferredReads.bytes < config.maxDeferredReadBytes else { return false }
    if !deferredReads.isEmpty { return true }  // keep arrival order behind kept reads
    if inputs.isBackedUp { return true }  // backpressure: the socket waits for the log
    return Int64(loop.currentTurnBusyNs / 1_000_000) >= config.turnReadBudgetMs
  }

  /// Keeps a copy of `bytes` and stops `conn` reading until they are handled.
  func readDeferred(_ conn: ServerConnection, _ bytes: UnsafeMutableRawBufferPointer) {
    conn.transport.stopReading()
    deferredReads.queue.append((conn, Array(bytes)))
    deferredReads.bytes += bytes.count
    deferredReads.deferred &+= 1
    armDeferredReads()
  }

  /// The input log drained below its backpressure mark: the kept reads go on.
  func inputsDrained() {
    if !deferredReads.isEmpty { armDeferredReads() }
  }

  private func armDeferredReads() {
    if deferredReads.timer == nil { deferredReads.timer = EventLoop.Timer(loop: loop) }
    // 1 ms, not 0: libuv 1.44 reruns a timer restarted with 0 in the same timers pass.
    deferredReads.timer?.start(afterMs: 1) { [unowned self] in self.handleDeferredReads() }
  }

  /// Hands kept reads back, oldest first, until this turn's budget is spent.
  func handleDeferredReads() {
    let budgetNs = UInt64(max(1, config.turnReadBudgetMs)) * 1_000_000
    while !deferredReads.isEmpty, !inputs.isBackedUp {
      let (conn, bytes) = deferredReads.queue[deferredReads.head]
      deferredReads.queue[deferredReads.head] = (conn, [])
      deferredReads.head += 1
      deferredReads.bytes -= bytes.count
      if !conn.transport.isClosed {
        var copy = bytes
        copy.withUnsafeMutableBytes { conn.handleRead($0) }
        if !conn.transport.isClosed { conn.transport.startReading() }
      }
      if loop.currentTurnBusyNs >= budgetNs { break }
    }
    if deferredReads.isEmpty {
      deferredReads.queue.removeAll(keepingCapacity: deferredReads.queue.count < 4_096)
      deferredReads.head = 0
    } else if !inputs.isBackedUp {
      armDeferredReads()
    }  // backed up: `inputsDrained` hands them back
  }

  func closeDeferredReads() {
    deferredReads.timer?.close()
    deferredReads.timer = nil
  }

  /// `/metrics`: the longest turn so far, reads kept for a later turn and their bytes.
  func refreshTurnMetrics() {
    metrics.mirror("relay_loop_turn_max_microseconds", Int(clamping: loop.longestTurnNs / 1_000))
    metrics.mirrorCounter("relay_loop_deferred_reads_total", deferredReads.deferred)
    metrics.mirror("relay_loop_deferred_read_bytes", deferredReads.bytes)
  }
}
