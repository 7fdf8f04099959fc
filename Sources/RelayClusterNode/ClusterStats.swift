// Cluster counters and the rate-limited error log of a ClusterNode.

/// Cluster counters for `/metrics` (docs/cluster.md, "Operating it").
package struct ClusterStats {
  package var appends: UInt64 = 0
  package var appendFailures: UInt64 = 0
  package var applied: UInt64 = 0
  package var rejected: UInt64 = 0
  /// Nodes this replica saw declared dead.
  package var deaths: UInt64 = 0
  package var rejoins: UInt64 = 0
  package var resets: UInt64 = 0
  package var divergences: UInt64 = 0
  package var snapshotsStored: UInt64 = 0
  package var snapshotBytes: UInt64 = 0
  /// How long the last snapshot took to join and digest (off the loop).
  package var snapshotNs: UInt64 = 0
  /// How long the last snapshot held the loop (its skeleton, payloads by reference),
  /// in wall time and in the loop thread's CPU time (the wall time of a loop that
  /// shares its core includes waiting for it), and the longest of each so far.
  package var snapshotCaptureNs: UInt64 = 0
  package var snapshotCaptureCpuNs: UInt64 = 0
  package var snapshotCaptureMaxNs: UInt64 = 0
  package var snapshotCaptureCpuMaxNs: UInt64 = 0
  /// Due snapshots replaced by a newer one while the one before was on its way.
  package var snapshotsSuperseded: UInt64 = 0
  /// Uploads abandoned (connection lost, Redis refused, staged bytes incomplete).
  package var snapshotStoreFailures: UInt64 = 0
  package var snapshotLoads: UInt64 = 0

  mutating func noteCapture(wallNs: UInt64, cpuNs: UInt64) {
    snapshotCaptureNs = wallNs
    snapshotCaptureCpuNs = cpuNs
    snapshotCaptureMaxNs = max(snapshotCaptureMaxNs, wallNs)
    snapshotCaptureCpuMaxNs = max(snapshotCaptureCpuMaxNs, cpuNs)
  }
}

/// At most one line per `everyMs`, with the count of those it held back.
struct RateLimitedLog {
  let everyMs: UInt64
  var lastMs: UInt64?
  var held = 0

  /// Whether to log now, and how many were held back since the last line.
  mutating func admit(nowMs: UInt64) -> (log: Bool, held: Int) {
    if let last = lastMs, nowMs < last + everyMs {
      held += 1
      return (false, held)
    }
    lastMs = nowMs
    defer { held = 0 }
    return (true, held)
  }
}
