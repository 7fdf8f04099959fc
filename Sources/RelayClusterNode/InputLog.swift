package import RelayCluster
package import RelayCore

/// The relay's one input path (DESIGN.md, "Layers"): every input of the core — a
/// socket opened, a text message, a socket closed, an HTTP action — goes
/// through an input log. Standalone, `LocalLog` applies each at once, with no extra
/// cost; clustered, `ClusterNode` appends it to the shared log and every node's
/// replica applies it when it reads it back (docs/cluster.md). The shell never asks
/// which one it has, except for the one borrowed fast path below.
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
}
