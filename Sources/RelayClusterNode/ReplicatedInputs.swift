package import RelayCluster
package import RelayCore

/// An input log of records (docs/cluster.md, "The log"; protocol/ §12a): each input
/// becomes a `LogInput` of this process's node number and takes effect when a
/// `Replica` applies its record. The cluster appends records to Redis
/// (ClusterNode+Append.swift), the durable single node to its data dir (RelayServer's
/// DiskLog.swift); what an input is as a record is written once, here. Sockets'
/// liveness is node-local (the shell's heartbeats): pongs are not logged, and a
/// silent socket is logged as what it becomes, a `closed` socket.
package protocol ReplicatedInputs: InputLog {
  var host: any ReplicaHost { get }
  /// This process's node number in the log (0 while it has none).
  var number: UInt32 { get }
  /// Logs one input; `failed` runs if it cannot be logged now (the caller answers
  /// `unavailable`, §12).
  func append(_ input: LogInput, failed: (() -> Void)?)
}

extension ReplicatedInputs {
  package var takesBorrowedText: Bool { false }

  /// Only a log that takes borrowed text is handed any (the durable node, RelayServer's DiskLog.swift).
  package func text(_ id: ConnectionID, borrowed payload: UnsafeRawBufferPointer) -> Bool { false }

  /// The node's number is in the top bits, so ids are unique across nodes (and
  /// across the restarts of a durable single node: each start is a new number).
  package func connectionID(local: UInt64) -> ConnectionID { Replica.connectionID(node: number, local: local) }

  // The failure handlers name the connection by its id: the host finds it in its
  // table (where it stays until it is closed) rather than through a weak reference,
  // which gives the object a side table and sends every later retain and release of
  // it (many per message) down the slow path. The host outlives its input log: unowned.
  package func open(_ id: ConnectionID) {
    append(.open(connection: id.raw)) { [unowned host = self.host] in host.closeUnlogged(id) }
  }

  package func text(_ id: ConnectionID, _ payload: [UInt8]) {
    append(.text(connection: id.raw, payload)) { [unowned host = self.host] in host.answerUnavailable(id, payload) }
  }

  package func closed(_ id: ConnectionID, clean: Bool) {
    // §13: a drained node's clients resume elsewhere (or, single, after the restart),
    // so their participants are held (lost), not gone. A socket of an earlier node
    // number is already closed on every replica.
    guard Replica.node(of: id.raw) == number else { return }
    append(.closed(connection: id.raw, clean: clean && !host.draining), failed: nil)
  }

  /// Answered when the record is applied, so every replica agrees on the outcome.
  package func admin(request: UInt64, _ action: AdminAction) {
    append(.admin(request: request, action)) { [unowned host = self.host] in host.failAdmin(request) }
  }
}
