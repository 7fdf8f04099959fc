import RelayCore
package import RelayCrypto
// Re-exported: `ClusterConfig` names Redis and Sentinel addresses in this module's API.
@_exported public import RelayRedis

/// Cluster settings (contract §12): nil `redis` means standalone.
public struct ClusterConfig: Sendable {
  public var redis: RedisAddress
  /// `--node-id`: this node's name in logs and in the log's `join` records.
  public var nodeId: String
  /// `--node-timeout`: a node silent this long is dead.
  public var nodeTimeoutMs: Int64 = 5_000
  /// `--snapshot-records` / `--snapshot-bytes`: a snapshot is due after this many
  /// records, or this many bytes of records, since the last one; the log keeps at
  /// most about twice that (docs/cluster.md, "Bounded history").
  public var snapshotRecords: UInt64 = 50_000
  public var snapshotBytes: UInt64 = 32 << 20
  /// `--redis-skip-policy-check`: trust a Redis whose `maxmemory-policy` cannot be
  /// read (managed services that hide CONFIG) or says it evicts.
  public var skipPolicyCheck = false
  /// The rules version this binary announces (`RelayCore.rulesVersion`; tests of
  /// rolling upgrades set another through `RELAY_TEST_RULES_VERSION`).
  public var rulesVersion: UInt32 = RelayCore.rulesVersion
  /// `redis+sentinel://…`: the sentinels that name the primary; `redis` then only
  /// carries the password and database (docs/cluster.md, "Redis high availability").
  public var sentinel: SentinelAddress?
  /// `--redis-min-replicas`: a record counts (is applied, and its append succeeds)
  /// only once this many replicas confirm they hold it (`WAIT`).
  public var minReplicas = 0
  /// `rediss://`: the client TLS context (the system's roots plus `--tls-ca-file`),
  /// made once at start so an unreadable CA file is refused then, not at connect.
  package var tls: TLSContext?

  public init(redis: RedisAddress, nodeId: String) {
    self.redis = redis
    self.nodeId = nodeId
  }
}

extension ClusterConfig {
  /// `rediss://` or `rediss+sentinel://`.
  public var usesTLS: Bool { sentinel?.tls ?? redis.tls }

  /// Makes the client TLS context when the URL asks for TLS: the system's roots plus
  /// `caFile` (contract §12, managed Redis). Throws when they cannot be read.
  public mutating func loadTLS(caFile: String?) throws {
    tls = usesTLS ? try TLSContext(clientWithCA: caFile, alsoSystemRoots: true) : nil
  }
}
