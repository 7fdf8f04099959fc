// A replica's snapshot (docs/cluster.md, "Bounded history"): the cluster's own
// replicated state — position, clock, nodes, their connections, the id counter —
// followed by the core's. Canonical, like the core's: tables are written in key
// order, so two replicas in the same state write the same bytes and their digests
// can be compared. Read back from Redis, so decoding distrusts every byte.
public import RelayCore

extension Replica {
  /// Bumped whenever the layout below changes.
  public static let snapshotVersion: UInt8 = 1

  /// The replicated state as it is now (right after the record at `position`).
  /// `successorRules`: the first snapshot of the generation that takes this one over
  /// in a rolling upgrade — not sealed, and running the newer rules version.
  public func snapshot(successorRules: UInt32? = nil) -> [UInt8] {
    snapshotParts(successorRules: successorRules).joined()
  }

  /// `snapshot(successorRules:)` with the core's replay logs captured, not written:
  /// cheap enough for the event loop at any replay budget; `joined()` (off the loop)
  /// gives exactly the bytes of `snapshot`. The core's bytes follow their length.
  public func snapshotParts(successorRules: UInt32? = nil) -> SnapshotParts {
    var w = BinaryWriter(capacity: 4_096)
    w.u8(Self.snapshotVersion)
    w.u64(position)
    w.i64(clockMs)
    w.i64(lastRawMs)
    w.u32(nextNumber)
    var shared = rules
    if let successorRules { shared?.rules = successorRules }
    w.optional(shared) { w, r in
      w.u8(r.format)
      w.u32(r.rules)
      w.bytes(r.configDigest)
    }
    w.count(nodes.count)
    for n in nodes.keys.sorted() {
      w.u32(n)
      w.string(nodes[n]?.name ?? "")
      w.i64(nodes[n]?.lastSeenMs ?? 0)
    }
    let owners = connectionsByNode.filter { !$0.value.isEmpty }
    w.count(owners.count)
    for n in owners.keys.sorted() {
      w.u32(n)
      let open = owners[n, default: []].sorted()
      w.count(open.count)
      for c in open { w.u64(c) }
    }
    w.u64(recordsSinceSnapshot)
    w.u64(bytesSinceSnapshot)
    w.u64(pendingGap ?? 0)
    w.bool(successorRules == nil && sealed)
    w.u64(ids.counter)
    return core.snapshotParts().framed(by: w.bytes)
  }

  /// A replica in the state `snapshot()` wrote. `makeCore` builds the core from its
  /// part of the bytes (the shell supplies config and token checks).
  public static func restore(
    _ bytes: [UInt8], ids: LogIdentifiers, config: ReplicaConfig,
    makeCore: ([UInt8], LogIdentifiers) throws(BinaryError) -> RelayCore
  ) throws(BinaryError) -> Replica {
    var r = BinaryReader(bytes)
    guard try r.u8() == snapshotVersion else { throw r.error("unknown snapshot version") }
    let position = try r.u64()
    let clock = try r.i64()
    let lastRaw = try r.i64()
    let nextNumber = try r.u32()
    let rules = try r.optional { r throws(BinaryError) in
      ClusterRules(format: try r.u8(), rules: try r.u32(), configDigest: try r.bytes())
    }
    // A clock only ever moves with a record's time (lastRaw), so a clock without one
    // is corrupt: the next record would set the clock back.
    guard clock >= 0, clock < maxTimeMs, lastRaw >= 0, lastRaw < maxTimeMs, lastRaw > 0 || clock == 0, nextNumber >= 1,
      nextNumber <= maxNodeNumber + 1
    else { throw r.error("clock or node counter out of range") }
    let nodes = try readNodes(&r, below: nextNumber)
    let owned = try readConnections(&r, nodes: nodes)
    let records = try r.u64()
    let recordBytes = try r.u64()
    let gap = try r.u64()
    let sealed = try r.bool()
    ids.counter = try r.u64()
    let core = try makeCore(try r.bytes(), ids)
    try r.expectEnd()
    let replica = Replica(core: core, ids: ids, config: config)
    replica.position = position
    replica.clockMs = clock
    replica.lastRawMs = lastRaw
    replica.nextNumber = nextNumber
    replica.rules = rules
    replica.nodes = nodes
    replica.connectionsByNode = owned
    replica.recordsSinceSnapshot = records
    replica.bytesSinceSnapshot = recordBytes
    replica.pendingGap = gap == 0 ? nil : gap
    replica.sealed = sealed
    return replica
  }

  private static func readNodes(_ r: inout BinaryReader, below next: UInt32) throws(BinaryError) -> [UInt32: NodeRecord] {
    var nodes: [UInt32: NodeRecord] = [:]
    var last: UInt32 = 0
    for _ in 0..<(try r.count(minBytes: 16)) {
      let n = try r.u32()
      guard n > last, n < next else { throw r.error("node numbers must ascend below the counter") }
      last = n
      let name = try r.string()
      let seen = try r.i64()
      guard seen >= 0, seen < maxTimeMs else { throw r.error("node time out of range") }
      nodes[n] = NodeRecord(name: name, lastSeenMs: seen)
    }
    return nodes
  }

  private static func readConnections(
    _ r: inout BinaryReader, nodes: [UInt32: NodeRecord]
  ) throws(BinaryError) -> [UInt32: Set<UInt64>] {
    var owned: [UInt32: Set<UInt64>] = [:]
    var last: UInt32 = 0
    for _ in 0..<(try r.count(minBytes: 8)) {
      let n = try r.u32()
      guard n > last, nodes[n] != nil else { throw r.error("connections of a node that is not live") }
      last = n
      var open = Set<UInt64>()
      var previous: UInt64 = 0
      for _ in 0..<(try r.count(minBytes: 8)) {
        let c = try r.u64()
        guard c > previous, node(of: c) == n else { throw r.error("connection ids must ascend within their node") }
        previous = c
        open.insert(c)
      }
      owned[n] = open
    }
    return owned
  }
}
