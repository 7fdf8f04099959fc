import EventLoop
import Logging
package import RelayCluster
package import RelayCore
import RelayCrypto
import RelayProtocol
import RelayPrimitives
// Re-exported: `ServerConfig.cluster` is a `ClusterConfig` (and names Redis addresses).
@_exported public import RelayClusterNode
import CoreMetrics

extension ServerConfig {
  /// The flags that change what the replicated core does with the same log, in one
  /// canonical text: every node of a generation must have the same (docs/cluster.md,
  /// "Versions"). Secrets enter as their SHA-256 only.
  func sharedFlags(fingerprint: (String) -> String) -> String {
    let c = core
    var lines = [
      "dev=\(devMode)", "secret=\(secret.map(fingerprint) ?? "")", "admin-key=\(adminKey.map(fingerprint) ?? "")",
      "webhook=\(webhookURL != nil)", "max-message-bytes=\(maxMessageBytes)", "max-participants=\(c.maxParticipants)",
      "max-sessions-per-connection=\(c.maxSessionsPerConnection)", "max-bad-messages=\(c.maxBadMessages)",
      "message-rate=\(c.messageRate)/\(c.messageWindowMs)", "hand-rate=\(c.handRate)/\(c.handWindowMs)",
      "join-rate=\(c.joinRate)/\(c.joinWindowMs)", "hello-timeout=\(c.helloTimeoutMs)",
      "heartbeat=\(c.heartbeatIntervalMs)/\(c.heartbeatTimeoutMs)", "grace=\(c.graceMs)/\(c.backgroundGraceMs)",
      "idle-timeout=\(c.idleTimeoutMs)", "replay=\(c.replayEvents)/\(c.replayAgeMs)/\(c.replayBytes)/\(c.replayBudgetBytes)",
      "ended-calls=\(c.maxEndedCalls)/\(c.maxEndedCallBytes)", "ring-timeout=\(c.ringTimeoutMs)",
      "identity=\(c.maxNameBytes)/\(c.maxAvatarBytes)", "ring-rate=\(c.ringRate)/\(c.ringWindowMs)",
      "max-push-devices=\(c.maxPushDevices)",
      "session-join-rate=\(c.sessionJoinRate)/\(c.sessionJoinWindowMs)",
      "tick-bounds=\(c.maxDeadlinesPerTick)/\(c.maxTickDeliveries)",
    ]
    if let cluster {
      lines.append("node-timeout=\(cluster.nodeTimeoutMs)")
      lines.append("snapshot=\(cluster.snapshotRecords)/\(cluster.snapshotBytes)")
      // One node applying records its replicas do not hold yet would void the
      // others' guarantee (docs/cluster.md, "Redis high availability"). Absent at 0,
      // so clusters without replicas keep their digest across this binary.
      if cluster.minReplicas > 0 { lines.append("redis-min-replicas=\(cluster.minReplicas)") }
    }
    return lines.joined(separator: "\n")
  }
}

/// What the shell asks of its input log (RelayClusterNode/InputLog.swift), and what the log
/// asks of the shell (RelayClusterNode/ReplicaHost.swift).
extension RelayServer: ReplicaHost {
  var isReady: Bool { !draining && inputs.acceptsInputs }

  /// The core's id of a new socket (a cluster node's number in its top bits).
  func makeConnectionID() -> ConnectionID {
    defer { nextConnection += 1 }
    return inputs.connectionID(local: nextConnection)
  }

  /// Standalone: one text message into the core, borrowed for the call; the caller
  /// applies the effects. One command in `commandSampling` is timed, so the
  /// command-duration histogram costs no clock read on most messages.
  func inputText(_ id: ConnectionID, borrowed payload: UnsafeRawBufferPointer) {
    commandCount &+= 1
    guard commandCount & (Self.commandSampling - 1) == 0 else {
      return core.receive(id, text: payload, at: now)
    }
    let started = Loop.hrtimeNs()
    core.receive(id, text: payload, at: now)
    metrics.commandLatency.recordNanoseconds(Int64(Loop.hrtimeNs() &- started))
  }

  /// Commands per timed one (a power of two).
  static let commandSampling: UInt64 = 16

  /// What cannot take inputs while not ready (§12 the cluster's Redis, §12a the data dir).
  var stateUnavailable: String { inputs.unavailable.state }
  var unavailableMessage: String { inputs.unavailable.message }

  /// §12: a command that needs shared state while it is unreachable gets
  /// `unavailable` (with its `id` as `re`), and changes nothing.
  package func answerUnavailable(_ id: ConnectionID, _ payload: [UInt8]) {
    guard let conn = connections[id], conn.isWebSocket else { return }
    var members: [(String, JSONValue)] = [("type", .string("error"))]
    if let id = (try? JSONParser.parse(payload))?.objectValue?["id"]?.stringValue { members.append(("re", .string(id))) }
    members.append(("code", .string(ErrorCode.unavailable.rawValue)))
    members.append(("message", .string(unavailableMessage)))
    deliver(Payload(object(members)), to: [conn.id])
  }

  /// A socket whose `open` could not be logged has no state anywhere: 1012, resume later.
  package func closeUnlogged(_ id: ConnectionID) {
    connections[id]?.close(code: CloseCode.serviceRestart, reason: stateUnavailable)
  }

  /// An admin or call action into the log; `conn` waits for the answer (nil for an
  /// input nobody waits for: a provider's token removal, §9a). Each gets a request
  /// number, under which the log's answer finds it.
  func admin(_ conn: ServerConnection?, _ action: AdminAction) {
    let request = nextAdminRequest
    nextAdminRequest += 1
    if let conn { pendingAdmin[request] = conn }
    inputs.admin(request: request, action)
  }

  // MARK: Applying the log

  /// What this node shares with every node of its generation.
  package var clusterRules: ClusterRules {
    let digest = Crypto.sha256(Array(config.sharedFlags { Crypto.hex(Crypto.sha256(Array($0.utf8))) }.utf8))
    let rules = config.cluster?.rulesVersion ?? config.durable?.rulesVersion ?? RelayCore.rulesVersion
    return ClusterRules(rules: rules, configDigest: digest)
  }

  /// Applies one record of the log to the replica and performs this node's share of
  /// its effects.
  package func applyRecord(_ raw: RawRecord) -> Applied {
    guard let replica else { return Applied() }
    let applied = replica.apply(raw)
    performApplied(applied)
    return applied
  }

  /// This node's share of an applied record's effects: its sockets' writes, and its
  /// own records' webhooks, pushes and admin answers.
  func performApplied(_ applied: Applied) {
    perform(applied.localEffects)
    if applied.ours {
      for (request, result) in applied.admin { answerAdmin(request, result) }
    }
  }

  /// A replica for a generation: empty, or restored from a stored snapshot (nil if
  /// those bytes are not one). The generation's secret seeds the replicated ids.
  /// Every socket of the old state is closed first (1012: reconnect and resume; the
  /// resume finds no state and the client joins afresh, §8). `ownFile`: the bytes come
  /// from this node's own checksummed data dir, not from the shared store whose
  /// digests replicas compare: the canonical-encoding check is skipped.
  @discardableResult
  package func installReplica(seed: [UInt8], restoring bytes: [UInt8]?, ownFile: Bool = false) -> Replica? {
    closeAllWebSockets(code: CloseCode.serviceRestart, reason: "cluster state reset")
    failPendingAdmin()
    var coreConfig = config.core
    coreConfig.sessionWebhooks = config.webhookURL != nil
    let ids = LogIdentifiers(seed: seed) { Crypto.hmacSHA256(key: $0, message: $1) }
    var replicaConfig = ReplicaConfig(
      nodeTimeoutMs: config.cluster?.nodeTimeoutMs ?? 5_000, limits: LogLimits(maxTextBytes: config.maxMessageBytes))
    replicaConfig.snapshotRecords = max(1, config.cluster?.snapshotRecords ?? config.durable?.snapshotRecords ?? 50_000)
    replicaConfig.snapshotBytes = max(1, config.cluster?.snapshotBytes ?? config.durable?.snapshotBytes ?? 32 << 20)
    let fresh: Replica
    if let bytes {
      let verify = verifyToken
      guard
        let restored = try? Replica.restore(bytes, ids: ids, config: replicaConfig, makeCore: { b, i throws(BinaryError) in
          try RelayCore(restoring: b, config: coreConfig, ids: i, verifyToken: verify, canonical: !ownFile)
        })
      else { return nil }
      fresh = restored
    } else {
      fresh = Replica(core: RelayCore(config: coreConfig, ids: ids, verifyToken: verifyToken), ids: ids, config: replicaConfig)
    }
    core = fresh.core
    replica = fresh
    return fresh
  }

  /// The bus is down: admin requests waiting for the log get 503.
  package func clusterBusLost() {
    failPendingAdmin()
  }

  package func closeAllWebSockets(code: UInt16, reason: String) {
    for conn in connections.values.sorted(by: { $0.id < $1.id }) where conn.isWebSocket {
      conn.close(code: code, reason: reason)
    }
  }

  // MARK: Admin actions through the log

  func answerAdmin(_ request: UInt64, _ result: AdminResult) {
    guard let conn = pendingAdmin.removeValue(forKey: request) else { return }
    respondAdmin(conn, result)
  }

  package func failAdmin(_ request: UInt64) {
    guard let conn = pendingAdmin.removeValue(forKey: request) else { return }
    respondError(conn, 503, ErrorCode.unavailable.rawValue, unavailableMessage)
  }

  func failPendingAdmin() {
    let waiting = pendingAdmin.sorted { $0.key < $1.key }
    pendingAdmin = [:]
    for (_, conn) in waiting {
      respondError(conn, 503, ErrorCode.unavailable.rawValue, unavailableMessage)
    }
  }
}

extension RelayServer {
  /// The input log's series (`relay_cluster_*`, `relay_data_dir_*`); none standalone.
  func refreshLogMetrics() {
    for figure in inputs.figures {
      switch figure {
      case .gauge(let name, let value): metrics.mirror(name, value)
      case .seconds(let name, let value): metrics.mirror(name, value)
      case .counter(let name, let total): metrics.mirrorCounter(name, total)
      }
    }
  }
}
