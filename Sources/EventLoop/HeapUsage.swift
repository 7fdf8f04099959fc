import CRelayShims

extension Loop {
  /// The allocator's view of the process heap (glibc `mallinfo2`): bytes in live
  /// blocks, and bytes freed but still held by the allocator (fragmentation).
  /// Walks every free list of every arena under its lock: with a large, fragmented
  /// heap that takes long, so the loop never calls it (`HeapGauge`).
  public static func heapUsage() -> (inUse: Int, freeHeld: Int) {
    var inUse = 0
    var freeHeld = 0
    relay_heap_usage(&inUse, &freeHeld)
    return (inUse, freeHeld)
  }
}

extension Loop {
  /// Gives free heap memory back to the system (glibc `malloc_trim(0)`: top of the
  /// heap and whole free pages inside it). glibc only trims the main arena's top on
  /// its own, so after a burst of frees (many connections' queues, replay logs) the
  /// freed pages would otherwise stay in RSS. Costs a walk over the free lists: call
  /// it rarely, and off the loop (`HeapGauge`). Returns whether memory was released.
  @discardableResult
  public static func trimHeap() -> Bool {
    relay_heap_trim() != 0
  }
}

/// The heap figures of `Loop.heapUsage()`, sampled on libuv's thread pool: the walk
/// and a trim (`Loop.trimHeap()`) run there, one sample at a time, and the loop reads
/// the figures of the last finished sample (for `/metrics`). Loop-bound.
public final class HeapGauge {
  /// Bytes in live blocks and bytes held free, as of the last finished sample.
  public private(set) var inUse = 0
  public private(set) var freeHeld = 0
  /// Finished samples: a reader that needs a figure taken after some moment waits
  /// for this to pass its value then by two (one may have been under way).
  public private(set) var samples: UInt64 = 0
  /// Trims run (the heap held more free than asked when sampled).
  public private(set) var trims: UInt64 = 0
  private var sampling = false

  public init() {}

  /// Starts a sample on the thread pool unless one is under way; when more than
  /// `trimAboveBytes` is held free, trims there too and samples again.
  public func sample(on loop: Loop, trimAboveBytes: Int) {
    guard !sampling else { return }
    sampling = true
    loop.offload({ () -> (inUse: Int, freeHeld: Int, trimmed: Bool) in
      let usage = Loop.heapUsage()
      guard usage.freeHeld > trimAboveBytes else { return (usage.inUse, usage.freeHeld, false) }
      Loop.trimHeap()
      let after = Loop.heapUsage()
      return (after.inUse, after.freeHeld, true)
    }) { [weak self] sampled in
      guard let self else { return }
      self.sampling = false
      self.inUse = sampled.inUse
      self.freeHeld = sampled.freeHeld
      self.samples += 1
      if sampled.trimmed { self.trims += 1 }
    }
  }
}
