// What the benchmarks read of the core's state (not for the request path).

extension RelayCore {
  /// Deadlines queued, cancelled ones not yet discarded included. For benchmarks.
  public var debugDeadlineCount: Int { deadlines.count }

  /// Connections opened and not yet `closed`, in id order. A replica restored from a
  /// snapshot rebuilds its per-node connection table from them (docs/cluster.md).
  public var openConnectionIDs: [ConnectionID] { connections.values.map(\.id).sorted() }
}
