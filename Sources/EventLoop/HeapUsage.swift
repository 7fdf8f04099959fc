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
