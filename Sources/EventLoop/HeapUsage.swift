import CRelayShims

extension Loop {
  /// The allocator's view of the process heap (glibc `mallinfo2`): bytes in live
  /// blocks, and bytes freed but still held by the allocator (fragmentation).
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
  /// it rarely. Returns whether memory was released.
  @discardableResult
  public static func trimHeap() -> Bool {
    relay_heap_trim() != 0
  }
}
