// What a snapshot captured last time, kept so that the next capture on the loop costs
// what changed since, not the whole state (docs/cluster.md, "Bounded history"; the
// bytes and their format are those of SnapshotEncode.swift, unchanged).
// - Each session keeps its member records from its first capture, patched where a member
//   joins, leaves or changes connection (a copy of the list if a capture still shares
//   it: the first such change per session after a capture pays it, as a join already
//   pays O(members) in fan-out). Its rate windows are values the capture shares as
//   they are (State.swift).
// - Connections and the users' connection lists are split into buckets by key; a
//   change names its key (a connection id, a uid), and at the end of the input (when
//   its effects are taken) that key's records are rebuilt in their bucket. So a
//   capture never finds a backlog, however many connections sent something since
//   the last one: it shares the bucket arrays copy-on-write, and the first change to
//   a bucket after it copies that one bucket. `joined()` sorts them off the loop, as
//   it sorted one flat array.
// Caches are not state: they are built when a core is known to be snapshotted
// (`keepSnapshotRecords`, by a replica from its start) or by the first capture (a
// core that is never snapshotted, standalone without a data dir, keeps none) or with
// a restored core's
// tables (`snapshotFillAll`: a restored core is snapshotted, and its first capture
// must not build a million records), and a capture with `reusing: false` ignores them
// (the reference the seeded tests compare against).

/// Records of one kind in buckets by key, a key's records replaced at the input
/// boundary after it changed.
struct BucketedCapture<Key: Hashable, Record> {
  /// A power of two: a bucket is the key's hash's top bits. At a million connections
  /// a bucket holds a few hundred records; at a hundred the empty ones cost a word each.
  static var bucketBits: Int { 12 }
  private var buckets: [[Record]] = Array(repeating: [], count: 1 << Self.bucketBits)
  /// Each held record's key at the same place: a change finds its records by
  /// scanning keys, never copying (retaining) a record it does not replace.
  private var keys: [[Key]] = Array(repeating: [], count: 1 << Self.bucketBits)
  /// Keys changed since the last `settle` (repeats allowed).
  private var pending: [Key] = []
  /// Whether records are kept (since `fill`): until then, touches are not noted.
  private(set) var keeping = false
  /// Whether records of one key must keep their order among themselves (the users'
  /// pairs: hello order); if not, a removal moves the bucket's last record into the gap.
  private let ordered: Bool
  private let hash: (Key) -> UInt64

  init(ordered: Bool, hash: @escaping (Key) -> UInt64) {
    self.ordered = ordered
    self.hash = hash
  }

  private func bucket(_ key: Key) -> Int { Int(truncatingIfNeeded: hash(key) >> UInt64(64 - Self.bucketBits)) }

  /// `key`'s records may differ from the held ones (added, changed or gone). Sites
  /// call this before or while they change it, so it is read only at the boundary.
  mutating func touch(_ key: Key) {
    if keeping, pending.last != key { pending.append(key) }
  }

  /// At an input boundary: each touched key's records are replaced by those `current`
  /// appends for it now. A bucket a capture still shares is copied once, by its first
  /// change after that capture.
  mutating func settle(current: (Key, inout [Record]) -> Void) {
    guard !pending.isEmpty else { return }
    var fresh: [Record] = []
    for k in pending {
      fresh.removeAll(keepingCapacity: true)
      current(k, &fresh)
      settled += fresh.count
      replace(k, with: fresh, in: bucket(k))
    }
    pending.removeAll(keepingCapacity: true)
  }

  /// `k`'s held records become `fresh`: written over its old places in order (other
  /// keys' records stay put), the surplus appended or removed.
  private mutating func replace(_ k: Key, with fresh: [Record], in i: Int) {
    var next = 0
    var j = 0
    while j < keys[i].count {
      guard keys[i][j] == k else {
        j += 1
        continue
      }
      if next < fresh.count {
        buckets[i][j] = fresh[next]
        next += 1
        j += 1
      } else if ordered {
        buckets[i].remove(at: j)
        keys[i].remove(at: j)
      } else {
        let last = keys[i].count - 1
        if j != last {
          buckets[i][j] = buckets[i][last]
          keys[i][j] = keys[i][last]
        }
        buckets[i].removeLast()
        keys[i].removeLast()
      }
    }
    for r in fresh[next...] {
      buckets[i].append(r)
      keys[i].append(k)
    }
  }

  /// Every bucket as held: what a capture shares (settled first, at a boundary).
  var held: [[Record]] { buckets }

  /// All records anew, nothing pending (a restore: built with the state, not by the
  /// first capture after it).
  mutating func fill(_ records: some Sequence<Record>, key: (Record) -> Key) {
    buckets = Array(repeating: [], count: 1 << Self.bucketBits)
    keys = Array(repeating: [], count: 1 << Self.bucketBits)
    pending = []
    keeping = true
    for r in records {
      let k = key(r)
      buckets[bucket(k)].append(r)
      keys[bucket(k)].append(k)
    }
  }

  /// Records built by `settle` so far (for tests).
  private(set) var settled = 0

  /// The number of records held (for tests and the bench's memory estimate).
  var heldRecords: Int { keys.reduce(0) { $0 + $1.count } }
}

/// The core's capture caches for connections and users (see the file comment).
struct SnapshotCache {
  /// Written sorted by id (`joined()`): their order in a bucket is free.
  var connections = BucketedCapture<UInt64, ConnectionRecord>(ordered: false) { ConnectionID($0).tableHash }
  /// Per uid its (uid, connection) pairs in hello order; a uid's pairs share a bucket.
  var users = BucketedCapture<String, UserConnections.Pair>(ordered: true) { UInt64(UInt(bitPattern: $0.hashValue)) }
}

extension RelayCore {
  /// The connection's snapshot record may have changed: every site that changes a
  /// field `ConnectionRecord` copies, or adds or removes a connection, calls this.
  func snapshotTouch(_ connection: Connection) { snapshotCache.connections.touch(connection.id.raw) }

  /// The user's list of connections changed (hello, close).
  func snapshotTouch(user uid: String) { snapshotCache.users.touch(uid) }

  /// This core will be snapshotted: its records are kept from now on (built now, at
  /// no cost for an empty core), not by its first capture. A no-op once kept.
  public func keepSnapshotRecords() {
    if !snapshotCache.connections.keeping { snapshotFillAll() }
  }

  /// A new session; in a core that keeps snapshot records, its members' are kept
  /// from its first join, not built by the next capture.
  func makeSession(_ id: String) -> Session {
    let session = Session(id: id, config: config, budget: replayBudget)
    if snapshotCache.connections.keeping { _ = session.memberRecords }
    return session
  }

  /// The first capture, or a restore: every record built from the tables, and kept.
  func snapshotFillAll() {
    snapshotCache.connections.fill(connections.values.lazy.map(ConnectionRecord.init), key: \.id)
    snapshotCache.users.fill(UserConnections(userConnections).buckets.joined(), key: \.uid)
    for s in sessions.values { _ = s.memberRecords }
  }

  /// An input boundary (effects are taken only between inputs): what the input
  /// touched is rebuilt now, a few records, so that no capture finds a backlog.
  func snapshotSettle() {
    let table = connections
    snapshotCache.connections.settle { id, records in
      if let c = table[ConnectionID(id)] { records.append(ConnectionRecord(c)) }
    }
    let users = userConnections
    snapshotCache.users.settle { uid, pairs in
      for c in users.elements(withKey: uid) { pairs.append(UserConnections.Pair(uid: uid, id: c.id.raw)) }
    }
  }

  /// The connection records, from the cache or (`reusing: false`) built afresh.
  func capturedConnections(reusing: Bool) -> [[ConnectionRecord]] {
    guard reusing else { return [connections.values.map(ConnectionRecord.init)] }
    if !snapshotCache.connections.keeping { snapshotFillAll() }
    snapshotSettle()
    return snapshotCache.connections.held
  }

  /// The users' connection pairs, from the cache or (`reusing: false`) built afresh.
  func capturedUsers(reusing: Bool) -> UserConnections {
    guard reusing else { return UserConnections(userConnections) }
    if !snapshotCache.users.keeping { snapshotFillAll() }
    snapshotSettle()
    return UserConnections(buckets: snapshotCache.users.held)
  }
}
