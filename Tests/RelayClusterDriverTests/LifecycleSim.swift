import RelayClusterDriver
import RelayPrimitives

/// A small model of the cluster's shared log for `NodeLifecycle` (docs/cluster.md,
/// "The log", "Bounded history", "Redis high availability"): a stream of records with
/// ids that only grow, replicas that copy a prefix of it, a stored snapshot and the
/// trim behind the previous one, generations that replace each other, and node
/// replicas that number joins in log order. Each simulated node is a machine with a
/// thin adapter here, as ClusterNode is on the loop.
struct LogModel {
  enum Kind: Equatable {
    case join(nonce: UInt64)
    case death(UInt32)
    case input
  }

  struct Record: Equatable {
    /// The position the append script counted (contiguous within a history).
    var seq: UInt64
    /// The stream id's numeric part: grows across failovers, unlike `seq`.
    var key: UInt64
    var kind: Kind
    var id: String { "\(key)-0" }
  }

  /// What a replica holds: its position, the live nodes, how many joins it numbered.
  struct Replica: Equatable {
    var position: UInt64 = 0
    var nodes: Set<UInt32> = []
    var joins: UInt32 = 0
  }

  struct Snapshot: Equatable {
    var record: Record
    var state: Replica
  }

  /// Snapshots fall due at positions that are multiples of this.
  static let snapshotEvery: UInt64 = 6

  var generation = "g1"
  var generations = 1
  var log: [Record] = []
  var nextSeq: UInt64 = 1
  /// Failovers so far: each moves the ids' base up.
  var era: UInt64 = 0
  /// Records up to this position are on the replicas; a failover loses the rest.
  var replicated: UInt64 = 0
  var snapshot: Snapshot?

  static func key(_ id: String) -> UInt64 { UInt64(id.split(separator: "-").first ?? "0") ?? 0 }

  mutating func append(_ kind: Kind) {
    let record = Record(seq: nextSeq, key: era * 1_000_000 + nextSeq, kind: kind)
    nextSeq += 1
    log.append(record)
  }

  /// `XREAD … STREAMS log lastId` (of generation `g`: an old one's log is empty).
  func read(_ g: String, after lastId: String, count: Int) -> [Record] {
    guard g == generation else { return [] }
    let mine = Self.key(lastId)
    return Array(log.filter { $0.key > mine }.prefix(count))
  }

  /// The failover: the records past `replicated` vanish, ids go on growing.
  mutating func failover() {
    log.removeAll { $0.seq > replicated }
    nextSeq = replicated + 1
    era += 1
  }

  /// The ticker's store: the newest snapshot, and the log trimmed behind the previous
  /// one (never behind the one a node would rebuild from). False if not newer.
  mutating func store(_ record: Record, _ state: Replica) -> Bool {
    if let old = snapshot, old.record.seq >= record.seq { return false }
    let previous = snapshot?.record.seq ?? 0
    snapshot = Snapshot(record: record, state: state)
    replicated = max(replicated, record.seq)
    log.removeAll { $0.seq <= previous }
    return true
  }

  mutating func replace(_ old: String) {
    guard old == generation else { return }
    generations += 1
    generation = "g\(generations)"
    log = []
    nextSeq = 1
    replicated = 0
    snapshot = nil
  }

  /// What applying `record` to `replica` means for a node numbered `number`: a record
  /// before its position would be applied twice (nil: the simulation fails), one past
  /// the next is a hole (`lostRecords`, not applied).
  static func apply(_ record: Record, to replica: inout Replica, number: UInt32) -> NodeLifecycle.Outcome? {
    var outcome = NodeLifecycle.Outcome()
    guard record.seq > replica.position else { return nil }
    guard record.seq == replica.position + 1 else {
      outcome.lostRecords = true
      return outcome
    }
    replica.position = record.seq
    switch record.kind {
    case .join(let nonce):
      replica.joins += 1
      replica.nodes.insert(replica.joins)
      outcome.joined = [.init(nonce: nonce, number: replica.joins)]
    case .death(let n):
      if replica.nodes.remove(n) != nil { outcome.deaths = [n] }
    case .input: break
    }
    outcome.listed = number == 0 || replica.nodes.contains(number)
    if record.seq % snapshotEvery == 0 { outcome.snapshotDue = record.seq }
    return outcome
  }
}

/// One simulated node: the machine, its replica, and the replies it waits for.
struct SimNode {
  struct Read: Equatable {
    var generation: String
    var epoch: UInt64
    var lastId: String
  }

  enum Pending: Equatable {
    case read(Read)
    case enter
    case verify(String)
    case loadSnapshot(String)
    case storedPosition(String, mine: UInt64)
    case reconnect
    /// A snapshot upload's awaited reply (a piece staged, or the swap).
    case upload(Upload)
  }

  /// The ticker's snapshot on its way to the store.
  struct Upload: Equatable {
    var machine: SnapshotUpload
    var generation: String
    var id: String
    var state: LogModel.Replica
  }

  var machine: NodeLifecycle
  var replica: LogModel.Replica?
  /// Set once a lost record was met: nothing more may be applied to this replica.
  var holed = false
  var pending: [Pending] = []
  /// A read of the current epoch reached the log's end.
  var caughtUpEpoch: UInt64?
  var tickArmed = false
  /// Joins sent on the current connections, and those sent on lost ones (stored or
  /// not), which the append machine decides at the next end of the log.
  var sentJoins: [UInt64] = []
  var unsettledJoins: [UInt64] = []
  var closedSockets = 0
  var nowMs: UInt64 = 0
  var lastAppendMs: UInt64 = 0

  init(seed: UInt64) {
    machine = NodeLifecycle(beatMs: 250, random: SeededRandom(seed: seed))
  }

  /// What `ClusterNode` asks before each step of an upload.
  func mayStore(_ g: String) -> Bool { machine.state == .ready && machine.generation == g && machine.number != 0 }

  var isTicker: Bool {
    guard machine.number != 0, let replica else { return false }
    return replica.nodes.min() == machine.number
  }

  var view: NodeLifecycle.TickerView {
    .init(isTicker: isTicker, dueMs: isTicker ? 1_000 : nil, logNowMs: Int64(nowMs))
  }
}
