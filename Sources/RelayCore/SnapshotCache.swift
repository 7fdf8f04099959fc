// What a snapshot captured last time, kept so that the next capture on the loop costs
// what changed since, not the whole state (docs/cluster.md, "Bounded history"; the
// bytes and their format are those of SnapshotEncode.swift, unchanged).
// - Each session keeps its member records, patched where a member joins, leaves or
//   changes connection (a copy of the list if a capture still shares it: the first
//   such change per session after a capture pays it, as a join already pays O(members)
//   in fan-out), and its rate-window records until a window may change (State.swift).
// - Connections and the users' connection lists are split into buckets by key; a
//   change names its key (a connection id, a uid), and the next capture rebuilds only
//   the buckets named since the last one. A capture shares the bucket arrays
//   copy-on-write; `joined()` sorts them off the loop, as it sorted one flat array.
// Caches are not state: a core restored from a snapshot starts with every key named
// (`restoredAll`), and a capture with `reusing: false` ignores them (the reference
// the seeded tests compare against).

/// Records of one kind in buckets by key, rebuilt per bucket when a key in it changed.
struct BucketedCapture<Key: Hashable, Record> {
  /// A power of two: a bucket is the key's hash's top bits. At a million connections
  /// a bucket holds a few hundred records; at a hundred the empty ones cost a word each.
  static var bucketBits: Int { 12 }
  private var buckets: [[Record]] = Array(repeating: [], count: 1 << Self.bucketBits)
  /// Keys changed since their bucket was last built (repeats allowed, folded when long).
  private var changed: [[Key]] = Array(repeating: [], count: 1 << Self.bucketBits)
  private let hash: (Key) -> UInt64

  init(hash: @escaping (Key) -> UInt64) { self.hash = hash }

  private func bucket(_ key: Key) -> Int { Int(truncatingIfNeeded: hash(key) >> UInt64(64 - Self.bucketBits)) }

  /// `key`'s records may differ from the captured ones (added, changed or gone).
  mutating func touch(_ key: Key) {
    let i = bucket(key)
    changed[i].append(key)
    // Bounded by the bucket, whatever the number of changes between captures.
    if changed[i].count > 2 * buckets[i].count + 32 { changed[i] = Array(Set(changed[i])) }
  }

  /// Every bucket as it is now: those with changed keys rebuilt by `current`, which
  /// appends a key's records now, the rest shared as they were. `key(record)` names a
  /// record's key.
  mutating func capture(key: (Record) -> Key, current: (Key, inout [Record]) -> Void) -> [[Record]] {
    lastRebuilt = 0
    for i in changed.indices where !changed[i].isEmpty {
      let keys = Set(changed[i])
      changed[i] = []
      // In place when no capture still shares the bucket (else one copy of it).
      buckets[i].removeAll { keys.contains(key($0)) }
      for k in keys { current(k, &buckets[i]) }
      lastRebuilt += buckets[i].count
    }
    return buckets
  }

  /// Records the last capture built or kept in rebuilt buckets (for tests).
  private(set) var lastRebuilt = 0

  /// The number of records held (for tests and the bench's memory estimate).
  var heldRecords: Int { buckets.reduce(0) { $0 + $1.count } }
}

/// The core's capture caches for connections and users (see the file comment).
struct SnapshotCache {
  var connections = BucketedCapture<UInt64, ConnectionRecord> { ConnectionID($0).tableHash }
  /// Per uid its (uid, connection) pairs in hello order; a uid's pairs share a bucket.
  var users = BucketedCapture<String, UserConnections.Pair> { UInt64(UInt(bitPattern: $0.hashValue)) }
}

extension RelayCore {
  /// The connection's snapshot record may have changed: every site that changes a
  /// field `ConnectionRecord` copies, or adds or removes a connection, calls this.
  func snapshotTouch(_ connection: Connection) { snapshotCache.connections.touch(connection.id.raw) }

  /// The user's list of connections changed (hello, close).
  func snapshotTouch(user uid: String) { snapshotCache.users.touch(uid) }

  /// After a restore: nothing captured yet matches the state.
  func snapshotTouchAll() {
    for c in connections.values {
      snapshotTouch(c)
      if let uid = c.uid { snapshotTouch(user: uid) }
    }
  }

  /// The connection records, from the cache or (`reusing: false`) built afresh.
  func capturedConnections(reusing: Bool) -> [[ConnectionRecord]] {
    guard reusing else { return [connections.values.map(ConnectionRecord.init)] }
    let table = connections
    return snapshotCache.connections.capture(key: \.id) { id, records in
      if let c = table[ConnectionID(id)] { records.append(ConnectionRecord(c)) }
    }
  }

  /// The users' connection pairs, from the cache or (`reusing: false`) built afresh.
  func capturedUsers(reusing: Bool) -> UserConnections {
    guard reusing else { return UserConnections(userConnections) }
    let table = userConnections
    let buckets = snapshotCache.users.capture(key: \.uid) { uid, pairs in
      for c in table.elements(withKey: uid) { pairs.append(UserConnections.Pair(uid: uid, id: c.id.raw)) }
    }
    return UserConnections(buckets: buckets)
  }
}
