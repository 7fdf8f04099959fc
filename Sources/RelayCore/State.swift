// The core's state: connections, sessions, their participants and the identity
// records they share (§3–§7a). Laid out for memory per idle member: shared
// rather than copied, inline where a list is nearly always 0 or 1 long.
// Reference types because the core mutates them in place through several tables;
// every collection that reaches output is iterated in insertion order.
import RelayProtocol

/// §5 participant status.
enum ParticipantStatus: String {
  case connected
  case lost
}

/// One accepted `hello`'s identity, immutable and shared by reference: the connection,
/// the participants it joined as, and the replay log's `participant.joined` entries
/// all point at the same record instead of each copying uid, name, avatar and role,
/// which is most of the memory per idle member.
///
/// Only what the core reads: the token's `exp` is checked at hello and not kept. The
/// hello's resume token lives here rather than in the Connection: the Connection
/// would need a 112-byte malloc chunk for it, while the Profile takes it for +16.
/// Sendable (immutable): a snapshot writes it off the loop (SnapshotParts.swift).
final class Profile: Sendable {
  let uid: String
  let name: String
  let avatar: String?
  let sessions: SessionGrant
  /// `welcome.resumeToken` (§8).
  let token: ResumeToken
  let role: Role

  init(_ identity: Identity, token: ResumeToken) {
    uid = identity.uid
    name = identity.name
    avatar = identity.avatar
    sessions = identity.sessions
    self.token = token
    role = identity.role
  }
}

/// One user in one session (§6: one user is one participant per session). Three words
/// after the object header, so one 48-byte malloc chunk: the rate windows live in the
/// session's side table, and status is not stored (see `status`).
final class Participant {
  /// The identity of the connection that joined (or took over) last: `name`, `avatar`
  /// and `role` follow it (§6 takeover).
  var profile: Profile
  let joinedAtWallMs: Int64
  /// `connection`'s raw value, `noConnection` while lost (an Optional would take a
  /// ninth byte and the object a 64-byte chunk).
  private var connectionRaw: UInt64
  private static let noConnection = UInt64.max

  init(profile: Profile, connection: ConnectionID, at: Instant) {
    precondition(connection.raw != Self.noConnection, "connection id reserved")
    self.profile = profile
    joinedAtWallMs = at.wallMs
    connectionRaw = connection.raw
  }

  /// A participant as a snapshot describes it (SnapshotEncode.swift); `connection` nil
  /// while lost. The caller has refused the reserved id.
  init(profile: Profile, joinedAtWallMs: Int64, connection: ConnectionID?) {
    self.profile = profile
    self.joinedAtWallMs = joinedAtWallMs
    connectionRaw = Self.noConnection
    setConnection(connection)
  }

  /// The connection that joined (nil while lost, §5). Change it only through
  /// `Session.attach`/`detach`, which keep the fan-out list current.
  var connection: ConnectionID? {
    connectionRaw == Self.noConnection ? nil : ConnectionID(connectionRaw)
  }

  fileprivate func setConnection(_ c: ConnectionID?) {
    precondition(c?.raw != Self.noConnection, "connection id reserved")
    connectionRaw = c?.raw ?? Self.noConnection
  }

  /// §5: a participant is `lost` exactly while it has no connection — every path that
  /// detaches one marks it lost, and every path that attaches one restores it.
  var status: ParticipantStatus { connection == nil ? .lost : .connected }

  var uid: String { profile.uid }
  var name: String { profile.name }
  var avatar: String? { profile.avatar }
  var role: Role { profile.role }
}

/// A participant's sliding windows (§7 raise/lower, §7a messages).
/// Limits and windows come from the config at each use (`RateWindow`).
struct RateWindows: Sendable {
  var hand = RateWindow()
  var message = RateWindow()
}

/// A raised hand (§7): queue position is the array index.
struct Hand {
  let uid: String
  let name: String
  let raisedAtWallMs: Int64

  /// The queue's O(1) invariants (§7) for appending `hand` after `last`, by name:
  /// `raisedAt` never decreases along the queue, and a participant is not queued
  /// twice in a row.
  static func violation(appending hand: Hand, after last: Hand?) -> String? {
    guard let last else { return nil }
    if hand.raisedAtWallMs < last.raisedAtWallMs {
      return "hand queue order: raisedAt \(hand.raisedAtWallMs) after \(last.raisedAtWallMs)"
    }
    return last.uid == hand.uid ? "hand queue uniqueness: \(hand.uid) is already queued" : nil
  }

  /// Each participant at most once anywhere in `queue` (O(n)), by name.
  static func violation(appending hand: Hand, anywhereIn queue: [Hand]) -> String? {
    queue.contains { $0.uid == hand.uid } ? "hand queue uniqueness: \(hand.uid) is already queued" : nil
  }
}

/// One session (room).
final class Session {
  let id: String
  /// Number of the last session event (§2: 1, 2, 3, …).
  var seq: Int64 = 0
  /// Participants in join order: the order of snapshots and of fan-out.
  private(set) var members: [Participant] = []
  private var byUid = RefTable<ParticipantsByUid>()
  /// §7 queue, in `hand.raised` order.
  var hands: [Hand] = [] { didSet { snapshotChunk = nil } }
  var replay: ReplayLog
  /// §5.2 `--session-join-rate`: the joins and leaves of all connections in this
  /// session within the last `sessionJoinWindowMs` (JoinRate.swift).
  var churnWindow = RateWindow()

  init(id: String, config: CoreConfig, budget: ReplayBudget? = nil) {
    self.id = id
    replay = ReplayLog(
      maxEvents: config.replayEvents, maxAgeMs: config.replayAgeMs, maxBytes: config.replayBytes,
      session: id, budget: budget)
    budget?.register(self)
  }

  /// The log's bytes leave the process-wide account with the session.
  deinit { replay.releaseAll() }

  var isEmpty: Bool { members.isEmpty }
  var count: Int { members.count }

  subscript(uid: String) -> Participant? { byUid[uid] }

  /// Fan-out list cache: rebuilt only when membership or a connection changes, so an
  /// event to a large session costs no per-member work in the core (DESIGN.md, "The
  /// hot path"); the array is shared copy-on-write with the `.send` effect.
  private var recipients: [ConnectionID]?

  /// Connections of connected participants, in join order (fan-out recipients).
  func connections(excluding excluded: ConnectionID? = nil) -> [ConnectionID] {
    let all = recipients ?? rebuildRecipients()
    guard let excluded else { return all }
    return all.filter { $0 != excluded }
  }

  private func rebuildRecipients() -> [ConnectionID] {
    var result: [ConnectionID] = []
    result.reserveCapacity(members.count)
    for participant in members {
      if let c = participant.connection { result.append(c) }
    }
    recipients = result
    return result
  }

  /// `"participants":[…],"hands":[…]` of the §6 snapshot, encoded once per state and
  /// shared by every `session.joined` until something in it changes: repeated joins
  /// cost a copy of these bytes, not an encoding of every member. Kept only from the
  /// second snapshot of one state on, so a session that merely grew by joins does not
  /// hold a copy of its member list (about 100 bytes per member) while idle.
  private var snapshotChunk: [UInt8]? {
    didSet { if snapshotChunk == nil { snapshotSeenAtSeq = -1 } }
  }
  private var snapshotSeenAtSeq: Int64 = -1

  /// The snapshot bytes for the session as it is now.
  func membersAndHandsBytes() -> [UInt8] {
    if let chunk = snapshotChunk, snapshotSeenAtSeq == seq { return chunk }
    var writer = JSONWriter(capacity: 64 + members.count * 96)
    writer.membersAndHands(self)
    if snapshotSeenAtSeq == seq { snapshotChunk = writer.bytes } else { snapshotChunk = nil }
    snapshotSeenAtSeq = seq
    return writer.bytes
  }

  /// A member's profile changed without a membership change (takeover).
  func invalidateSnapshot() {
    snapshotChunk = nil
    capturedMembers = nil
  }

  func add(_ participant: Participant) {
    precondition(byUid[participant.uid] == nil, "participant added twice")
    byUid.insert(participant)
    members.append(participant)
    recipients = nil
    snapshotChunk = nil
    capturedMembers?.append(MemberRecord(participant))
  }

  func remove(_ uid: String) {
    guard let removed = byUid.removeValue(forKey: uid), let index = members.firstIndex(where: { $0 === removed })
    else { return }
    members.remove(at: index)
    capturedMembers?.remove(at: index)
    rates[uid] = nil
    recipients = nil
    snapshotChunk = nil
  }

  /// §7 and §7a rate windows by uid, created on a participant's first raise/lower or
  /// message: most members never use them. Dropped with the participant, so a user
  /// who leaves and joins again starts afresh, as a new participant. Values, so a
  /// snapshot shares the table as it is (copy-on-write: the first change after a
  /// capture copies it, as that change's fan-out already visits every member).
  private(set) var rates: [String: RateWindows] = [:]

  /// Takes one from the participant's `window` (§7 hand, §7a message), creating its
  /// windows if it has none: whether it was granted.
  func acquire(
    _ window: WritableKeyPath<RateWindows, RateWindow>, of participant: Participant, at: Instant, limit: Int,
    windowMs: Int64
  ) -> Bool {
    rates[participant.uid, default: RateWindows()][keyPath: window].tryAcquire(
      at: at.monoMs, lateMs: at.lateMs, limit: limit, windowMs: windowMs)
  }

  /// The members as a snapshot copies them, kept until a member, its connection or
  /// its profile changes (SnapshotCache.swift).
  var memberRecords: [MemberRecord] {
    if let kept = capturedMembers { return kept }
    let fresh = members.map(MemberRecord.init)
    capturedMembers = fresh
    return fresh
  }

  /// Built by the first capture that needs them (or a restore, or at creation in a
  /// core that keeps its records), then kept; nil again after a takeover changed a
  /// profile.
  private var capturedMembers: [MemberRecord]?

  /// Whether the member records are kept now (for tests).
  var hasKeptMemberRecords: Bool { capturedMembers != nil }

  /// The member's record, patched where it stands in join order.
  private func recapture(_ participant: Participant) {
    guard capturedMembers != nil, let i = members.firstIndex(where: { $0 === participant }) else { return }
    capturedMembers?[i] = MemberRecord(participant)
  }

  /// Puts back a member's windows from a snapshot.
  func restoreWindows(_ windows: RateWindows, uid: String) { rates[uid] = windows }

  /// Points the participant at a (new) connection, which also makes it `connected`:
  /// join takeover, resume.
  func attach(_ participant: Participant, to c: ConnectionID) {
    participant.setConnection(c)
    recipients = nil
    snapshotChunk = nil
    recapture(participant)
  }

  /// The participant keeps its place but has no connection: `lost` (§5).
  func detach(_ participant: Participant) {
    participant.setConnection(nil)
    recipients = nil
    snapshotChunk = nil
    recapture(participant)
  }

  func handIndex(of uid: String) -> Int? { hands.firstIndex { $0.uid == uid } }

  /// Appends a raised hand. The O(1) checks stay on in release builds; the scan for
  /// a second entry anywhere in the queue is O(n) on every raise, so debug builds
  /// (the tests and simulations) run it.
  func queueHand(_ hand: Hand) {
    if let broken = Hand.violation(appending: hand, after: hands.last) { fatalError(broken) }
    assert(Hand.violation(appending: hand, anywhereIn: hands) == nil, "hand queue uniqueness: \(hand.uid)")
    hands.append(hand)
  }
}

/// Where a connection is in its lifecycle (§4).
enum ConnectionPhase {
  /// Upgraded; only `hello` is accepted (§4.3).
  case awaitingHello
  /// `welcome` sent.
  case ready
  /// The core asked the shell to close it, or the shell reported it closed;
  /// further input is ignored.
  case closing
}

/// One WebSocket connection.
final class Connection {
  let id: ConnectionID
  /// The accepted `hello`'s identity (nil before `welcome`).
  var profile: Profile?
  /// Sessions this connection is the member for, in join order (§7a: membership is
  /// per connection).
  var sessions = SmallList<String>()
  /// Monotonic ms of its upgrade or last text message. Nothing in the core reads it
  /// (heartbeats are the shell's, RelayPrimitives `Heartbeats`); it is a field of the
  /// rules-3 snapshot format, kept so snapshots stay byte-identical across binaries of
  /// one rules version (SnapshotEncode.swift).
  // TODO(Sources/RelayCore/SnapshotEncode.swift): drop it with the next rules version.
  var lastInboundMonoMs: Int64
  var phase = ConnectionPhase.awaitingHello
  /// §8: the resume token (`profile.token`) was used by a resume, or its lost state's
  /// grace ended.
  var tokenSpent = false
  /// §5 last `client.background` value (selects `backgroundGraceMs`).
  var background = false
  /// §4 `hello.device`: the app install this connection comes from (§9a awake).
  var device: String?
  /// §2 consecutive bad messages (saturating; the limit closes the connection first).
  var badMessages: Int32 = 0
  /// §6 joins and leaves of this connection (`--join-rate`).
  var joinWindow = RateWindow()
  /// §4 `hello.capabilities` offered `presence.diff` (§5.6).
  var acceptsPresenceDiff = false
  /// §4 `hello.capabilities` offered `resume.after_unload` (§5).
  var goingAwayIsLost = false

  init(id: ConnectionID, at: Instant) {
    self.id = id
    lastInboundMonoMs = at.monoMs
  }

  var uid: String? { profile?.uid }
  /// `welcome.resumeToken`, set at hello. (`welcome.connectionId` is not kept: nothing
  /// reads it after `welcome`.)
  var token: ResumeToken? { profile?.token }
  /// For tests and tools.
  var resumeToken: String { token?.string ?? "" }
}
