import RelayCluster
import RelayClusterDriver
package import RelayCore

/// Clustered inputs (docs/cluster.md): each is appended to the shared log and takes
/// effect when this node's replica reads it back, like every node's
/// (ReplicatedInputs.swift says what each input is as a record).
extension ClusterNode: ReplicatedInputs {
  package var acceptsInputs: Bool { isReady }
  package var isBackedUp: Bool { driver.pipeline.isFull }

  // MARK: Lifecycle (InputLog)

  /// Joins the cluster; `ready` runs each time the node has joined and caught up.
  package func start(ready: @escaping () -> Void) {
    onReady = ready
    start()
  }

  /// A node listens once it has joined and caught up with the log, so a client that
  /// waits for /healthz never meets a node that would refuse its upgrade.
  package var listensAtOnce: Bool { false }

  /// Leaves cleanly (its `leave` record, so peers do not wait for its death) unless
  /// forced or handed over.
  package func stop(force: Bool) {
    if force { close() } else { leave {} }
  }

  package var unavailable: (state: String, message: String) {
    ("cluster unavailable", "shared state unreachable; retry")
  }

  package func owns(_ id: ConnectionID) -> Bool { Replica.node(of: id.raw) == number }

  /// `relay_cluster_*` (docs/operating.md).
  package var figures: [LogFigure] {
    let s = stats
    return [
      .gauge("relay_cluster_ready", isReady ? 1 : 0),
      .gauge("relay_cluster_node_number", Int(number)),
      .gauge("relay_cluster_live_nodes", host.replica?.nodes.count ?? 0),
      .counter("relay_cluster_appends_total", s.appends),
      .counter("relay_cluster_append_failures_total", s.appendFailures),
      .counter("relay_cluster_entries_applied_total", s.applied),
      .counter("relay_cluster_node_deaths_total", s.deaths),
      .counter("relay_cluster_rejoins_total", s.rejoins),
      .counter("relay_cluster_resets_total", s.resets),
      .counter("relay_cluster_rejected_entries_total", s.rejected),
      .counter("relay_cluster_divergences_total", s.divergences),
      .counter("relay_cluster_snapshots_stored_total", s.snapshotsStored),
      .counter("relay_cluster_snapshot_loads_total", s.snapshotLoads),
      .gauge("relay_cluster_snapshot_bytes", Int(s.snapshotBytes)),
      .seconds("relay_cluster_snapshot_seconds", Double(s.snapshotNs) / 1e9),
      .seconds("relay_cluster_snapshot_capture_seconds", Double(s.snapshotCaptureNs) / 1e9),
      .seconds("relay_cluster_snapshot_capture_cpu_seconds", Double(s.snapshotCaptureCpuNs) / 1e9),
      .seconds("relay_cluster_snapshot_capture_max_seconds", Double(s.snapshotCaptureMaxNs) / 1e9),
      .seconds("relay_cluster_snapshot_capture_cpu_max_seconds", Double(s.snapshotCaptureCpuMaxNs) / 1e9),
      .counter("relay_cluster_snapshots_superseded_total", s.snapshotsSuperseded),
      .counter("relay_cluster_snapshot_store_failures_total", s.snapshotStoreFailures),
      .gauge("relay_cluster_log_position", Int(clamping: host.replica?.position ?? 0)),
    ]
  }
}
