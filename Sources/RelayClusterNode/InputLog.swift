package import RelayCluster
package import RelayCore

/// The relay's one input path (DESIGN.md, "Layers"): every input of the core — a
/// socket opened, a text message, a socket closed, an HTTP action — goes
/// through an input log. Standalone, `LocalLog` applies each at once, with no extra
/// cost; clustered, `ClusterNode` appends it to the shared log and every node's
/// replica applies it when it reads it back (docs/cluster.md); with `--data-dir`,
/// `DiskLog` writes it to the node's own log first (docs/operating.md). The shell
/// never asks which one it has: what differs (when to listen, how to stop, what to
/// call a refusal, which series to report) is asked of the log.
package protocol InputLog: AnyObject {
  /// Text may be handed over borrowed from the read buffer (`LocalLog`): it is
  /// applied during the call. A log that keeps inputs for later needs a copy.
  var takesBorrowedText: Bool { get }
  /// Whether inputs can be taken now (a cluster node: joined, caught up, appends
  /// succeeding).
  var acceptsInputs: Bool { get }
  /// Inputs are taken faster than they can be logged (a cluster node's appends
  /// back up behind Redis): the shell stops reading sockets until `inputsDrained`.
  var isBackedUp: Bool { get }
  /// The core's id for the process-local socket number `local`.
  func connectionID(local: UInt64) -> ConnectionID
  func open(_ id: ConnectionID)
  func text(_ id: ConnectionID, _ payload: [UInt8])
  /// A text message borrowed from the read buffer (`takesBorrowedText`), taken during
  /// the call; false: not taken now, the caller hands it over as a copy (`text(_:_:)`)
  /// once the codec is done. The caller applies the core's effects after the codec
  /// (`applyEffects`).
  func text(_ id: ConnectionID, borrowed payload: UnsafeRawBufferPointer) -> Bool
  /// `clean`: the socket ended after a closing handshake.
  func closed(_ id: ConnectionID, clean: Bool)
  /// An admin or call action; its result is answered to whoever the host registered
  /// under `request` (`ReplicaHost.answerAdmin`, or `failAdmin` when it cannot be
  /// logged).
  func admin(request: UInt64, _ action: AdminAction)

  // MARK: Lifecycle

  /// Starts the log's own work (timers, connections). `ready` runs each time it can
  /// take inputs after it could not (a cluster node joined and caught up).
  func start(ready: @escaping () -> Void)
  /// Whether the shell listens at once; else once `ready` ran (or after a grace).
  var listensAtOnce: Bool { get }
  /// The turn's inputs are made durable before anything they caused leaves the
  /// process (run before the loop's flush).
  func beforeFlush()
  /// The process stops: `force` at once (connections closed), else cleanly (a
  /// cluster node logs its leave).
  func stop(force: Bool)
  /// The loop has ended: what the log holds open (its files) is closed.
  func loopEnded()
  /// The shell performed the core's effects (after an input, or a turn's presence
  /// diffs): the core's next deadline may have moved. A log arms what fires it —
  /// standalone the core's own `tick`; a data dir and a cluster's ticker arm their
  /// logged `tick` records as they apply records.
  func effectsApplied()

  // MARK: What the operator and clients see

  /// What a refusal says while `acceptsInputs` is false: the HTTP reason
  /// (`state`) and the error message for a command (§12, §12a).
  var unavailable: (state: String, message: String) { get }
  /// Whether `id` was given under this log's current identity (a cluster node that
  /// rejoined has a new number: its older sockets belong to no replica).
  func owns(_ id: ConnectionID) -> Bool
  /// The log's series for `/metrics` (docs/operating.md).
  var figures: [LogFigure] { get }
}

/// One series an input log reports on `/metrics`.
package enum LogFigure {
  case gauge(String, Int)
  case seconds(String, Double)
  case counter(String, UInt64)
}

/// An input log with no lifecycle of its own (standalone): always ready.
extension InputLog {
  package func start(ready: @escaping () -> Void) {}
  package var listensAtOnce: Bool { true }
  package func beforeFlush() {}
  package func stop(force: Bool) {}
  package func loopEnded() {}
  package func effectsApplied() {}
  package var unavailable: (state: String, message: String) { ("unavailable", "retry") }
  package func owns(_ id: ConnectionID) -> Bool { true }
  package var figures: [LogFigure] { [] }
}
