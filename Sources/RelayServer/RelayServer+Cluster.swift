import EventLoop
import Logging
import RelayCluster
import RelayCore
import RelayCrypto
import RelayProtocol
import RelayWebSocket

/// Cluster settings (contract §12): nil `redis` means standalone.
public struct ClusterConfig: Sendable {
  public var redis: RedisAddress
  /// `--node-id`: this node's name in logs and in the log's `join` entries.
  public var nodeId: String
  /// `--node-timeout`: a node silent this long is dead.
  public var nodeTimeoutMs: Int64 = 5_000

  public init(redis: RedisAddress, nodeId: String) {
    self.redis = redis
    self.nodeId = nodeId
  }
}

/// The inputs of the core, standalone or clustered. Standalone, each goes straight
/// into the core; clustered, each is logged, and every node's replica applies it
/// when it reads it back from the log (ClusterNode.swift, docs/cluster.md).
extension RelayServer {
  var isReady: Bool { !draining && (cluster?.isReady ?? true) }

  /// The core's id of a new socket: in a cluster, the node's number is in its top
  /// bits, so ids are unique across nodes (Replica.connectionID).
  func makeConnectionID() -> ConnectionID {
    defer { nextConnection += 1 }
    guard let cluster else { return ConnectionID(nextConnection) }
    return Replica.connectionID(node: cluster.number, local: nextConnection)
  }

  func inputOpen(_ conn: ServerConnection) {
    guard let cluster else {
      core.open(conn.id, at: now)
      return applyEffects()
    }
    clusterLastInbound[conn.id.raw] = loop.nowMs
    cluster.append(.open(connection: conn.id.raw)) { [weak self, weak conn] in
      guard let self, let conn else { return }
      conn.close(code: CloseCode.serviceRestart, reason: "cluster unavailable")
    }
  }

  func inputText(_ conn: ServerConnection, _ payload: [UInt8]) {
    guard let cluster else {
      payload.withUnsafeBytes { inputText(conn.id, borrowed: $0) }
      return applyEffects()
    }
    clusterLastInbound[conn.id.raw] = loop.nowMs
    cluster.append(.text(connection: conn.id.raw, payload)) { [weak self, weak conn] in
      guard let self, let conn else { return }
      self.answerUnavailable(conn, payload)
    }
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

  /// Any other inbound frame proves liveness (§5).
  func inputAlive(_ conn: ServerConnection) {
    guard cluster != nil else {
      core.alive(conn.id, at: now)
      return applyEffects()
    }
    clusterLastInbound[conn.id.raw] = loop.nowMs
  }

  /// `clean`: the socket ended after a closing handshake.
  func inputClosed(_ conn: ServerConnection, clean: Bool) {
    guard let cluster else {
      core.closed(conn.id, clean: clean, at: now)
      return applyEffects()
    }
    clusterLastInbound[conn.id.raw] = nil
    // §12: a drained node's clients resume elsewhere, so their participants are
    // held (lost), not gone. A socket of an earlier node number is already closed
    // on every replica.
    guard Replica.node(of: conn.id.raw) == cluster.number else { return }
    cluster.append(.closed(connection: conn.id.raw, clean: clean && !draining))
  }

  /// §12: a command that needs shared state while it is unreachable gets
  /// `unavailable` (with its `id` as `re`), and changes nothing.
  private func answerUnavailable(_ conn: ServerConnection, _ payload: [UInt8]) {
    guard conn.isWebSocket else { return }
    var members: [(String, JSONValue)] = [("type", .string("error"))]
    if let id = (try? JSONParser.parse(payload))?.objectValue?["id"]?.stringValue { members.append(("re", .string(id))) }
    members.append(("code", .string(ErrorCode.unavailable.rawValue)))
    members.append(("message", .string("shared state unreachable; retry")))
    deliver(Payload(object(members)), to: [conn.id])
  }

  // MARK: Applying the log

  /// Applies one log entry to the replica and performs this node's share of its
  /// effects. Returns the nodes found dead at this entry (nil without a replica).
  func applyLogEntry(_ entry: LogEntry) -> [UInt32]? {
    guard let replica else { return nil }
    let applied = replica.apply(entry)
    perform(applied.effects, webhooks: applied.ours)
    if applied.ours, let (request, result) = applied.admin { answerAdmin(request, result) }
    return applied.deaths
  }

  /// A fresh replica for a new log generation; the generation's secret seeds the
  /// replicated ids. Every socket of the old state is closed first (1012: reconnect
  /// and resume; the resume finds no state and the client joins afresh, §8).
  func resetClusterState(seed: [UInt8]) {
    closeAllWebSockets(code: CloseCode.serviceRestart, reason: "cluster state reset")
    failPendingAdmin()
    var coreConfig = config.core
    coreConfig.sessionWebhooks = config.webhookURL != nil
    coreConfig.heartbeatsInShell = true
    let ids = LogIdentifiers(seed: seed) { Crypto.hmacSHA256(key: $0, message: $1) }
    core = RelayCore(config: coreConfig, ids: ids, verifyToken: verifyToken)
    replica = Replica(core: core, localNode: cluster?.number ?? 0, nodeTimeoutMs: config.cluster?.nodeTimeoutMs ?? 5_000)
  }

  /// The bus is down: admin requests waiting for the log get 503.
  func clusterBusLost() {
    failPendingAdmin()
  }

  func closeAllWebSockets(code: UInt16, reason: String) {
    for conn in connections.values.sorted(by: { $0.id < $1.id }) where conn.isWebSocket {
      conn.close(code: code, reason: reason)
    }
  }

  // MARK: Admin actions through the log

  /// Standalone: runs `action` on the core now. Clustered: logs it and answers when
  /// the entry is applied, so every node agrees on its outcome.
  func runAdmin(_ conn: ServerConnection, _ action: AdminAction) {
    guard let cluster else {
      let result = Replica.run(action, on: core, at: now)
      applyEffects()
      return respondAdmin(conn, result)
    }
    let request = nextAdminRequest
    nextAdminRequest += 1
    pendingAdmin[request] = conn
    cluster.append(.admin(request: request, action)) { [weak self] in
      guard let self, let conn = self.pendingAdmin.removeValue(forKey: request) else { return }
      self.respondError(conn, 503, ErrorCode.unavailable.rawValue, "shared state unreachable; retry")
    }
  }

  private func answerAdmin(_ request: UInt64, _ result: AdminResult) {
    guard let conn = pendingAdmin.removeValue(forKey: request) else { return }
    respondAdmin(conn, result)
  }

  private func failPendingAdmin() {
    let waiting = pendingAdmin.sorted { $0.key < $1.key }
    pendingAdmin = [:]
    for (_, conn) in waiting {
      respondError(conn, 503, ErrorCode.unavailable.rawValue, "shared state unreachable; retry")
    }
  }

  // MARK: Heartbeats in the shell

  /// Clustered, each node pings and times out its own sockets (§5) and logs their
  /// loss; the replicated core sees only logged inputs.
  func clusterHeartbeats() {
    guard cluster != nil else { return }
    let nowMs = loop.nowMs
    let interval = UInt64(max(0, config.core.heartbeatIntervalMs))
    let timeout = UInt64(max(0, config.core.heartbeatTimeoutMs))
    let pingNow = interval > 0 && nowMs >= lastClusterPingMs + interval
    if pingNow { lastClusterPingMs = nowMs }
    for conn in connections.values where conn.isWebSocket {
      guard let last = clusterLastInbound[conn.id.raw] else { continue }
      if timeout > 0, nowMs > last + timeout {
        conn.drop()
      } else if pingNow {
        sendPing(conn)
      }
    }
  }
}

extension RelayServer {
  /// `relay_cluster_*` series; absent standalone.
  func refreshClusterMetrics() {
    guard let cluster else { return }
    let s = cluster.stats
    metrics.mirror("relay_cluster_ready", cluster.isReady ? 1 : 0)
    metrics.mirror("relay_cluster_node_number", Int(cluster.number))
    metrics.mirror("relay_cluster_live_nodes", replica?.nodes.count ?? 0)
    metrics.mirrorCounter("relay_cluster_appends_total", s.appends)
    metrics.mirrorCounter("relay_cluster_append_failures_total", s.appendFailures)
    metrics.mirrorCounter("relay_cluster_entries_applied_total", s.applied)
    metrics.mirrorCounter("relay_cluster_node_deaths_total", s.deaths)
    metrics.mirrorCounter("relay_cluster_rejoins_total", s.rejoins)
    metrics.mirrorCounter("relay_cluster_resets_total", s.resets)
  }
}
