package import EventLoop
package import RelayCluster
package import RelayCore

/// What a replicated input log (a cluster node, the durable single node) needs from
/// the shell that owns the sockets and the replica (DESIGN.md, "Layers"): named by
/// what the log does with it, not by the server's internals. The shell conforms;
/// the log keeps it unowned (the shell outlives its input log).
package protocol ReplicaHost: AnyObject {
  /// The loop every timer, Redis connection and off-loop job of the log runs on.
  var loop: Loop { get }

  // MARK: The replica

  /// The replica the log's records are applied to; nil before the first one is installed.
  var replica: Replica? { get }
  /// The log format, rules version and shared flags this node's replica runs with
  /// (docs/cluster.md, "Rolling upgrades").
  var clusterRules: ClusterRules { get }
  /// Replaces the replica (empty, or restored from a snapshot; nil if the bytes are
  /// not one); the shell closes its sockets first, as their state is gone (§8).
  /// `ownFile`: the bytes come from this node's own checksummed file (no canonical check).
  @discardableResult
  func installReplica(seed: [UInt8], restoring bytes: [UInt8]?, ownFile: Bool) -> Replica?
  /// Applies one record read back from the log and performs this node's share of its
  /// effects (writes, and its own records' webhooks, pushes and admin answers).
  func applyRecord(_ raw: RawRecord) -> Applied

  // MARK: The sockets

  /// Whether the shell is draining (§13): a socket closed now is held as lost.
  var draining: Bool { get }
  /// The shell may read its sockets again: the log's backlog drained (`isBackedUp`).
  func inputsDrained()
  /// Closes every WebSocket (a replica reset or a rejoin: clients resume, §8).
  func closeAllWebSockets(code: UInt16, reason: String)
  /// A socket whose `open` could not be logged: closed (1012), as it has no state.
  func closeUnlogged(_ id: ConnectionID)
  /// A text message that could not be logged: answered `unavailable` (§12).
  func answerUnavailable(_ id: ConnectionID, _ payload: [UInt8])
  /// The admin action registered under `request` could not be logged: answered 503.
  func failAdmin(_ request: UInt64)
  /// The log's bus is lost: every admin action waiting for its record is answered 503.
  func clusterBusLost()

  // MARK: The process

  /// A condition this process cannot serve under: logged, and the process exits non-zero.
  func fatal(_ message: String)
  /// A rolling upgrade handed the generation over to newer nodes: drain and exit.
  func superseded()
}
