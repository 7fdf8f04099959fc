// What the benchmarks read of the core's state (not for the request path).

extension RelayCore {
  /// Deadlines queued, cancelled ones not yet discarded included. For benchmarks.
  public var debugDeadlineCount: Int { deadlines.count }
}
