// Outbound memory of the whole process (contract §1): the per-connection cap bounds
// one reader, this bounds them all. Past `--outbound-budget-bytes` queued and not
// taken by the kernel, the connections holding the most are closed 4008 first, as
// slow consumers. Freed memory is then given back to the system: glibc keeps freed
// pages of a burst (thousands of queues) in RSS unless asked to trim.
import EventLoop
import RelayCore
import Logging

/// The shell's outbound bookkeeping, one per server.
final class OutboundBudget {
  /// A slow consumer flushing what was in flight and its close frame.
  struct Flushing {
    let id: ConnectionID
    /// Closed regardless at this time.
    let dueMs: Int64
    /// Bytes still queued at the last sweep that saw progress, and when that was.
    var queued: Int
    var progressMs: Int64
  }
  private(set) var flushing: [Flushing] = []

  func flushing(_ entry: Flushing) { flushing.append(entry) }

  /// Updates every entry; takes out those `step` says are finished.
  func updateFlushing(_ step: (inout Flushing) -> Bool) {
    var kept: [Flushing] = []
    for var entry in flushing where !step(&entry) { kept.append(entry) }
    flushing = kept
  }
  /// Connections closed because the process-wide budget was exceeded.
  var budgetCloses: UInt64 = 0
  /// The heap's figures, sampled (and trimmed) off the loop, and when the last
  /// sample was started (monotonic ms).
  let heap = HeapGauge()
  var lastHeapSampleMs: Int64 = 0
  /// `SO_SNDBUF` the kernel granted an accepted socket (Linux: twice what was asked),
  /// read from the first one: what each connection may hold in the kernel.
  var socketSendBufferBytes = 0
}

extension RelayServer {
  /// Closes the biggest holders until the queued bytes of all connections are within
  /// the budget again. Ties go to the older connection id, so the choice is stable.
  func enforceOutboundBudget() {
    let budget = config.outboundBudgetBytes
    guard budget > 0, loop.stats.queuedBytes > budget else { return }
    let holders = connections.values
      .filter { $0.transport.acceptsWrites && $0.transport.queuedBytes > 0 }
      .sorted { ($0.transport.queuedBytes, $1.id) > ($1.transport.queuedBytes, $0.id) }
    for conn in holders {
      guard loop.stats.queuedBytes > budget else { break }
      outbound.budgetCloses += 1
      conn.slowConsumer()
    }
    logger.warning("outbound budget exceeded", metadata: ["closed": "\(outbound.budgetCloses)", "queued": "\(loop.stats.queuedBytes)"])
  }

  /// Every sweep: a slow consumer whose close frame has gone to the kernel is shut
  /// down gracefully (the FIN follows the frame, and its socket is read until it
  /// ends, so no reset overtakes the frame). One whose queue has not moved for
  /// `slowConsumerStallMs` (it reads nothing), or that is still flushing at its
  /// deadline, is closed. The kernel wakes a writer only once half its send buffer
  /// (autotuned up to megabytes) has drained, so a slow reader's progress comes in
  /// steps seconds apart. Then a large amount of freed heap is returned.
  func outboundSweep(nowMs: Int64) {
    if !outbound.flushing.isEmpty {
      outbound.updateFlushing { entry in
        guard let conn = connections[entry.id], conn.transport.acceptsWrites else { return true }
        let queued = conn.transport.queuedBytes
        if queued == 0 {
          conn.transport.shutdown()
          return true
        }
        if queued < entry.queued {
          entry.queued = queued
          entry.progressMs = nowMs
        }
        guard nowMs >= entry.dueMs || nowMs - entry.progressMs >= config.slowConsumerStallMs else { return false }
        conn.abort()
        return true
      }
    }
    enforceOutboundBudget()  // echo output does not pass through `applyEffects`
    // Off the loop: the sample and the trim walk the whole heap (HeapGauge).
    guard nowMs - outbound.lastHeapSampleMs >= config.heapTrimIntervalMs else { return }
    outbound.lastHeapSampleMs = nowMs
    outbound.heap.sample(on: loop, trimAboveBytes: config.heapTrimThresholdBytes)
  }

  /// `/metrics` gauges and counters of this file.
  func refreshOutboundMetrics() {
    metrics.mirror("relay_outbound_queued_bytes", loop.stats.queuedBytes)
    metrics.mirror("relay_outbound_budget_bytes", config.outboundBudgetBytes)
    metrics.mirrorCounter("relay_outbound_budget_closes_total", outbound.budgetCloses)
    metrics.mirrorCounter("relay_heap_trims_total", outbound.heap.trims)
    // Heap in use vs held free by the allocator: tells live state from fragmentation
    // when sizing memory per connection. Sampled every `heapTrimIntervalMs`, off the loop.
    metrics.mirror("relay_heap_in_use_bytes", outbound.heap.inUse)
    metrics.mirror("relay_heap_free_bytes", outbound.heap.freeHeld)
    metrics.mirrorCounter("relay_heap_samples_total", outbound.heap.samples)
    // Kernel memory outside the queues above: at most this much per open socket.
    metrics.mirror("relay_socket_send_buffer_bytes", outbound.socketSendBufferBytes)
    metrics.mirror("relay_kernel_send_buffer_bound_bytes", outbound.socketSendBufferBytes * connections.count)
  }
}
