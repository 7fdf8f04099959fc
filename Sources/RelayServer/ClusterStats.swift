// Cluster counters and the rate-limited error log of a ClusterNode.

/// Cluster counters for `/metrics` (docs/cluster.md, "Operating it").
struct ClusterStats {
  var appends: UInt64 = 0
  var appendFailures: UInt64 = 0
  var applied: UInt64 = 0
  var rejected: UInt64 = 0
  /// Nodes this replica saw declared dead.
  var deaths: UInt64 = 0
  var rejoins: UInt64 = 0
  var resets: UInt64 = 0
  var divergences: UInt64 = 0
  var snapshotsStored: UInt64 = 0
  var snapshotBytes: UInt64 = 0
  /// How long the last snapshot took to join and digest (off the loop).
  var snapshotNs: UInt64 = 0
  /// How long the last snapshot held the loop (its skeleton, payloads by reference).
  var snapshotCaptureNs: UInt64 = 0
  /// Due snapshots replaced by a newer one while the one before was on its way.
  var snapshotsSuperseded: UInt64 = 0
  /// Uploads abandoned (connection lost, Redis refused, staged bytes incomplete).
  var snapshotStoreFailures: UInt64 = 0
  var snapshotLoads: UInt64 = 0
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
