import EventLoop
import Logging
import RelayCluster
import RelayClusterDriver
import RelayCore
import RelayPrimitives

// The node's life as events and actions (NodeLifecycle.swift): this adapter hands the
// machine Redis's replies and the timers, and executes what it decides — sends,
// timers, logs and counters, the host's sockets.
extension ClusterNode {
  func step(_ event: NodeLifecycle.Event) {
    for action in lifecycle.handle(event) { execute(action) }
  }

  func execute(_ action: NodeLifecycle.Action) {
    switch action {
    case .openConnections: openConnections()
    case .verifyHistory(let mine): verifyHistory(lastApplied: mine)
    case .driver(let event): perform(driver.handle(event))
    case .resetNotice:
      logger.warning("cluster state was lost in Redis: resetting this node", metadata: ["node": "\(config.nodeId)"])
      stats.resets += 1
    case .dropUnloggedCloses: unloggedCloses = []
    case .retryUnloggedCloses:
      let retry = unloggedCloses
      unloggedCloses = []
      for input in retry { append(input) }
    case .loadSnapshot(let g): loadSnapshot(g)
    case .read(let g, let epoch, let from): readLoop(g, epoch: epoch, from: from)
    case .join(let nonce):
      let join = LogInput.join(JoinRequest(name: config.nodeId, nonce: nonce, rules: host.clusterRules))
      send(LogBatch(node: 0, inputs: [join]), [(join, { [weak self] in self?.step(.joinFailed(nonce: nonce)) })])
    case .setLocalNode(let n): host.replica?.localNode = n
    case .joined(let n): logger.info("cluster node joined", metadata: ["node": "\(config.nodeId)", "number": "\(n)"])
    case .ready(let reconnected): becameReady(reconnected: reconnected)
    case .declaredDead:
      logger.error("this node was declared dead by the cluster: rejoining", metadata: ["node": "\(config.nodeId)"])
      stats.rejoins += 1
    case .closeSockets(let reason): host.closeAllWebSockets(code: CloseCode.serviceRestart, reason: reason)
    case .fatal(let reason): host.fatal(reason)
    case .snapshotDue(let position, let id): snapshotDue(at: position, id: id)
    case .divergedNotice(let position):
      stats.divergences += 1
      logger.error(
        "this node's replica diverged from the cluster's snapshot: rebuilding", metadata: ["position": "\(position)"])
    case .handOver: break  // executed where the record's upgrade is known (apply)
    case .askStoredPosition(let reason): askStoredPosition(reason: reason)
    case .rebuilding(let reason):
      logger.warning("rebuilding this node's replica from the newest snapshot", metadata: ["why": "\(reason)"])
    case .replaceGeneration(let old, let why): replaceGeneration(old, why)
    case .beat: append(.beat)
    case .armTick(let delay): tickTimer?.start(afterMs: delay) { [unowned self] in self.step(.tickDue) }
    case .stopTick: tickTimer?.stop()
    case .tick: append(.tick)
    case .busLost(let wasUp): busLost(wasUp: wasUp)
    case .reconnect(let delay): reconnectTimer?.start(afterMs: delay) { [unowned self] in self.connect() }
    case .cancelReconnect: reconnectTimer?.stop()
    }
  }

  private func becameReady(reconnected: Bool) {
    if reconnected {
      logger.info("cluster bus reconnected", metadata: ["node": "\(config.nodeId)", "number": "\(number)"])
    } else {
      logger.info("cluster node ready", metadata: ["node": "\(config.nodeId)", "number": "\(number)"])
      onReady?()
    }
  }

  /// A generation given up (NodeLifecycle cleared it): logged, then a new one replaces it.
  private func replaceGeneration(_ g: String, _ why: NodeLifecycle.Replacement) {
    switch why {
    case .historyLost(let mine):
      logger.error(
        "the log in Redis lacks records this node applied (a failover lost them): starting a new generation",
        metadata: ["node": "\(config.nodeId)", "lastApplied": "\(mine)"])
      stats.resets += 1
    case .snapshotUnreadable:
      logger.error("the stored cluster snapshot is unreadable: starting a new generation")
    case .inconsistent(let reason):
      logger.error("the cluster log is inconsistent: starting a new generation", metadata: ["why": "\(reason)"])
    }
    bootstrapReplacing(g)
  }
}
