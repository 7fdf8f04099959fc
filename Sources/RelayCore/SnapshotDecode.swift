// Restoring a core from `snapshot()` bytes (SnapshotEncode.swift has the layout). A
// snapshot comes from the shared store like a log entry, and is distrusted like one
// (docs/cluster.md: the log is input): any bytes give either an identical core or an
// error, never a trap. Besides every read being bounds-checked (Binary.swift), the
// state is checked for what the core's code assumes and would trap on, or silently
// misbehave with: references (a participant's connection, a hand's member, a
// deadline's record or call) must resolve, keys must be unique, each table must come
// in its canonical order (so one state has one encoding), and times and counters
// must lie far from where the core's arithmetic on them could overflow.
public import RelayProtocol

extension RelayCore {
  /// A core in the state `snapshot()` wrote, running under `config` (which the
  /// snapshot does not carry: it is the same on every node). `ids` continues where
  /// the snapshotted core's source was: restoring its position is the caller's
  /// business (the cluster's ids are numbered draws). Throws for anything that is not
  /// exactly a snapshot of this version.
  ///
  /// `canonical` false skips the last check, that the bytes are the one encoding of
  /// the state (a re-encoding of it all, close to half the cost of a restore): for a
  /// snapshot this process's own kind wrote into a checksummed file that no replica
  /// compares digests of (a data dir, DataFile.swift). Every other check stays.
  public convenience init(
    restoring bytes: [UInt8], config: CoreConfig, ids: any IdentifierSource,
    verifyToken: @escaping (String, Int64) -> Identity?, canonical: Bool = true
  ) throws(BinaryError) {
    self.init(config: config, ids: ids, verifyToken: verifyToken)
    var reader = SnapshotReader(bytes, core: self)
    reader.checksCanonical = canonical
    try reader.readCore()
  }
}

/// Reads one core into a fresh `RelayCore`.
struct SnapshotReader {
  var r: BinaryReader
  var checksCanonical = true
  let core: RelayCore
  /// The profile table, by index.
  var profiles: [Profile] = []
  /// Sessions in snapshot order (the replay budget refers to them by index).
  var sessions: [Session] = []

  init(_ bytes: [UInt8], core: RelayCore) {
    r = BinaryReader(bytes)
    self.core = core
  }

  mutating func readCore() throws(BinaryError) {
    let version = try r.u8()
    guard version == RelayCore.snapshotVersion else { throw r.error("unknown snapshot version \(version)") }
    for _ in 0..<(try r.count(minBytes: 15)) { profiles.append(try profile()) }
    var previous: ConnectionID?
    for _ in 0..<(try r.count(minBytes: 30)) {
      let c = try connection()
      guard previous.map({ $0 < c.id }) ?? true else { throw r.error("connections out of order") }
      previous = c.id
      core.connections.insert(c)
    }
    try userConnections()
    core.grantedSessions = try grantedSessions()
    var previousId: String?
    for _ in 0..<(try r.count(minBytes: 29)) {
      let s = try session()
      try ascending(&previousId, s.id, "sessions")
      core.sessions[s.id] = s
      sessions.append(s)
    }
    try replayBudget()
    core.liveness = try liveness()
    core.calls = try callBook()
    core.counters = try coreStats()
    core.deadlines = try deadlines()
    core.push = try pushRegistry()
    try r.expectEnd()
    core.snapshotFillAll()
    // One state, one encoding: whatever the checks above let through in another
    // order or numbering (profiles referenced out of first-use order, say) would give
    // replicas different digests of the same state.
    guard !checksCanonical || core.snapshot() == r.input else {
      throw BinaryError(offset: 0, reason: "not the canonical encoding of its state")
    }
  }

  // MARK: Checked values

  /// Milliseconds (monotonic or wall) within ±2⁵³: beyond any clock, and far enough
  /// from Int64's ends that no sum the core makes of them (time + timeout) overflows.
  mutating func time() throws(BinaryError) -> Int64 {
    let t = try r.i64()
    guard t >= -(1 << 53), t <= 1 << 53 else { throw r.error("time \(t) out of range") }
    return t
  }

  /// An id counter or event count below 2⁶², so incrementing it can never overflow.
  mutating func counter() throws(BinaryError) -> UInt64 {
    let v = try r.u64()
    guard v < 1 << 62 else { throw r.error("counter \(v) out of range") }
    return v
  }

  /// A size or count kept as `Int`, in 0...2⁵³.
  mutating func size() throws(BinaryError) -> Int {
    let v = try r.i64()
    guard v >= 0, v <= 1 << 53, let n = Int(exactly: v) else { throw r.error("size \(v) out of range") }
    return n
  }

  mutating func connectionID() throws(BinaryError) -> ConnectionID {
    let raw = try r.u64()
    // UInt64.max marks a lost participant (State.swift).
    guard raw != UInt64.max else { throw r.error("reserved connection id") }
    return ConnectionID(raw)
  }

  mutating func profileRef() throws(BinaryError) -> Profile {
    let raw = try r.u32()
    guard let i = Int(exactly: raw), i < profiles.count else { throw r.error("unknown profile \(raw)") }
    return profiles[i]
  }

  mutating func strings() throws(BinaryError) -> [String] {
    var all: [String] = []
    for _ in 0..<(try r.count(minBytes: 4)) { all.append(try r.string()) }
    return all
  }

  /// Refuses lists with a repeated element (the core keeps sets in them).
  func distinct<T: Hashable>(_ list: [T], _ what: String) throws(BinaryError) {
    guard Set(list).count == list.count else { throw r.error("repeated \(what)") }
  }

  /// Keys of a sorted table: strictly ascending, so each state has one encoding.
  func ascending<T: Comparable>(_ previous: inout T?, _ next: T, _ what: String) throws(BinaryError) {
    if let p = previous, !(p < next) { throw r.error("\(what) out of order") }
    previous = next
  }

  // MARK: Profiles, connections, users

  mutating func profile() throws(BinaryError) -> Profile {
    let uid = try r.string()
    let name = try r.string()
    let avatar = try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.string() }
    let grant: SessionGrant
    switch try r.u8() {
    case 0: grant = .any
    case 1: grant = .only(try strings())
    default: throw r.error("unknown session grant")
    }
    let token = try r.string()
    let role: Role
    switch try r.u8() {
    case 0: role = .host
    case 1: role = .participant
    default: throw r.error("unknown role")
    }
    let identity = Identity(uid: uid, name: name, avatar: avatar, role: role, sessions: grant)
    return Profile(identity, token: ResumeToken(token))
  }

  mutating func connection() throws(BinaryError) -> Connection {
    let c = Connection(id: try connectionID(), at: Instant(monoMs: 0, wallMs: 0))
    c.profile = try r.bool() ? try profileRef() : nil
    let ids = try strings()
    try distinct(ids, "session of a connection")
    for id in ids { c.sessions.append(id) }
    c.lastInboundMonoMs = try time()
    switch try r.u8() {
    case 0 where c.profile == nil: c.phase = .awaitingHello
    case 1 where c.profile != nil: c.phase = .ready
    case 2: c.phase = .closing
    default: throw r.error("connection phase unknown or inconsistent with its hello")
    }
    c.tokenSpent = try r.bool()
    c.background = try r.bool()
    c.device = try r.bool() ? try deviceId() : nil
    let bad = try r.u32()
    guard let badMessages = Int32(exactly: bad) else { throw r.error("bad message count \(bad)") }
    c.badMessages = badMessages
    c.joinWindow = try rateWindow()
    return c
  }

  mutating func rateWindow() throws(BinaryError) -> RateWindow {
    var times: [Int64] = []
    for _ in 0..<(try r.count(minBytes: 8)) { times.append(try time()) }
    let oldest = try r.u32()
    guard let index = Int32(exactly: oldest), let window = RateWindow(times: times, oldest: index) else {
      throw r.error("rate window index \(oldest) outside its \(times.count) instants")
    }
    return window
  }

  /// Every connection that said hello is listed exactly once, under its own uid.
  mutating func userConnections() throws(BinaryError) {
    var listed: Set<ConnectionID> = []
    var previous: String?
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      try ascending(&previous, uid, "users")
      for _ in 0..<(try r.count(minBytes: 8)) {
        let id = try connectionID()
        guard let c = core.connections[id], c.uid == uid, listed.insert(id).inserted else {
          throw r.error("user \(uid) lists \(id), not one of its connections")
        }
        core.userConnections.append(c)
      }
    }
    let said = core.connections.values.filter { $0.profile != nil }.count
    guard listed.count == said else { throw r.error("connections missing from their user's list") }
  }

  mutating func grantedSessions() throws(BinaryError) -> [String: Set<String>] {
    var grants: [String: Set<String>] = [:]
    var previous: String?
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      try ascending(&previous, uid, "grants")
      var previousId: String?
      var ids: Set<String> = []
      for _ in 0..<(try r.count(minBytes: 4)) {
        let id = try r.string()
        try ascending(&previousId, id, "granted sessions")
        ids.insert(id)
      }
      guard !ids.isEmpty else { throw r.error("empty grant") }
      grants[uid] = ids
    }
    return grants
  }

  // MARK: Sessions

  mutating func session() throws(BinaryError) -> Session {
    let s = Session(id: try r.string(), config: core.config, budget: core.replayBudget)
    s.seq = try time()
    guard s.seq >= 0 else { throw r.error("negative seq") }
    for _ in 0..<(try r.count(minBytes: 13)) {
      let p = try participant()
      guard s[p.uid] == nil else { throw r.error("\(p.uid) twice in session \(s.id)") }
      s.add(p)
    }
    for _ in 0..<(try r.count(minBytes: 16)) {
      let h = Hand(uid: try r.string(), name: try r.string(), raisedAtWallMs: try time())
      guard s[h.uid] != nil, s.handIndex(of: h.uid) == nil else {
        throw r.error("hand of \(h.uid): not a member, or raised twice")
      }
      s.hands.append(h)
    }
    var previous: String?
    for _ in 0..<(try r.count(minBytes: 16)) {
      let uid = try r.string()
      try ascending(&previous, uid, "rate windows")
      guard s[uid] != nil else { throw r.error("rate windows of non-member \(uid)") }
      let hand = try rateWindow()
      s.restoreWindows(RateWindows(hand: hand, message: try rateWindow()), uid: uid)
    }
    s.churnWindow = try rateWindow()
    try replayLog(s)
    return s
  }

  /// A member: its connection, if any, must be an open connection of the same user.
  mutating func participant() throws(BinaryError) -> Participant {
    let profile = try profileRef()
    let joinedAt = try time()
    let c = try r.bool() ? try connectionID() : nil
    if let c, core.connections[c]?.uid != profile.uid {
      throw r.error("participant \(profile.uid) on \(c), not a connection of that user")
    }
    return Participant(profile: profile, joinedAtWallMs: joinedAt, connection: c)
  }

  /// The kept events, whose seqs must run consecutively up to the session's seq (the
  /// log traps on anything else when it next records).
  mutating func replayLog(_ s: Session) throws(BinaryError) {
    let oldestSeq = try time()
    var events: [(atMonoMs: Int64, body: RecordedBody)] = []
    for _ in 0..<(try r.count(minBytes: 9)) {
      let at = try time()
      switch try r.u8() {
      case 0: events.append((at, .payload(Payload(try r.bytes()))))
      case 1: events.append((at, .joined(try profileRef(), wallMs: try time())))
      default: throw r.error("unknown replay entry")
      }
    }
    let consistent = events.isEmpty ? oldestSeq == 0 : oldestSeq >= 1 && oldestSeq + Int64(events.count) - 1 == s.seq
    guard consistent else { throw r.error("replay seqs of \(s.id) do not end at its seq") }
    s.replay.restore(oldestSeq: oldestSeq, events)
  }

  /// The eviction order: each record names a session by index and takes that log's
  /// next kept seq.
  mutating func replayBudget() throws(BinaryError) {
    let evictions = try counter()
    var next = sessions.map { $0.replay.oldestSeq ?? 0 }
    var records: [(session: Session, seq: Int64)] = []
    for _ in 0..<(try r.count(minBytes: 4)) {
      let raw = try r.u32()
      guard let i = Int(exactly: raw), i < sessions.count, sessions[i].replay.count > 0, next[i] <= sessions[i].seq
      else { throw r.error("replay record for no kept event") }
      records.append((sessions[i], next[i]))
      next[i] += 1
    }
    core.replayBudget.restore(evictions: evictions, records: records)
  }
}
