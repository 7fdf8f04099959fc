public import RelayCore

/// What applying one record produced.
public struct Applied {
  /// The core's effects, in order.
  public var effects: [Effect] = []
  /// The record was logged by this replica's own node: its webhooks are ours to POST
  /// and its admin results ours to answer.
  public var ours = false

  /// This node's share of `effects`: every node writes to its own sockets, but only
  /// the node that logged the record POSTs its webhooks and sends its pushes, so
  /// each happens once in the cluster (docs/cluster.md).
  public var localEffects: [Effect] {
    guard !ours, effects.contains(where: Self.isSideEffect) else { return effects }
    return effects.filter { !Self.isSideEffect($0) }
  }

  private static func isSideEffect(_ effect: Effect) -> Bool {
    switch effect {
    case .webhook, .push: return true
    case .send, .close: return false
    }
  }
  /// Answers to HTTP admin actions of this record.
  public var admin: [(request: UInt64, result: AdminResult)] = []
  /// Nodes found dead at this record, in number order.
  public var deaths: [UInt32] = []
  /// Joins applied: the joining node recognises its number by its nonce.
  public var joined: [(nonce: UInt64, number: UInt32)] = []
  /// Joins refused (another format, rules or shared flags), with the reason.
  public var refusedJoins: [(nonce: UInt64, reason: String)] = []
  /// Why the record was rejected (nil: accepted).
  public var rejected: String?
  /// The log lost records this replica needs (two records in a row continue past a
  /// hole): the replica cannot go on and must be rebuilt from a snapshot.
  public var lostRecords = false
  /// Every replica snapshots its state now, at this log position (and logs a digest).
  public var snapshotDue: UInt64?
  /// A stored snapshot's digest disagrees with this replica's own at that position.
  public var diverged: UInt64?
  /// The generation was handed over to one of this rules version: every node of it
  /// closes its clients; `handoffBy` (the ticker before the seal) stores the state.
  public var upgrade: (rules: UInt32, handoffBy: UInt32?)?

  public init() {}
}
