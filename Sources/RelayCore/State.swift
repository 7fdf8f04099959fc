// The core's state: connections, users, sessions and their participants (§3–§7a).
// Reference types because the core mutates them in place through several tables;
// every collection that reaches output is iterated in insertion order.
import RelayProtocol

/// §5 participant status.
enum ParticipantStatus: String {
  case connected
  case lost
}

/// One user in one session (§6: one user is one participant per session).
final class Participant {
  let uid: String
  var name: String
  var avatar: String?
  var role: Role
  let joinedAtWallMs: Int64
  var status = ParticipantStatus.connected
  /// The connection that joined (nil while lost, §5). Change it only through
  /// `Session.attach`/`detach`, which keep the fan-out list current.
  fileprivate(set) var connection: ConnectionID?
  var handWindow: RateWindow
  var messageWindow: RateWindow

  init(identity: Identity, connection: ConnectionID, at: Instant, config: CoreConfig) {
    uid = identity.uid
    name = identity.name
    avatar = identity.avatar
    role = identity.role
    joinedAtWallMs = at.wallMs
    self.connection = connection
    handWindow = RateWindow(limit: config.handRate, windowMs: config.handWindowMs)
    messageWindow = RateWindow(limit: config.messageRate, windowMs: config.messageWindowMs)
  }
}

/// A raised hand (§7): queue position is the array index.
struct Hand {
  let uid: String
  let name: String
  let raisedAtWallMs: Int64
}

/// One session (room).
final class Session {
  let id: String
  /// Number of the last session event (§2: 1, 2, 3, …).
  var seq: Int64 = 0
  /// Participant uids in join order: the order of snapshots and of fan-out.
  private(set) var order: [String] = []
  private(set) var participants: [String: Participant] = [:]
  /// §7 queue, in `hand.raised` order.
  var hands: [Hand] = []
  var replay: ReplayLog

  init(id: String, config: CoreConfig) {
    self.id = id
    replay = ReplayLog(maxEvents: config.replayEvents, maxAgeMs: config.replayAgeMs)
  }

  var isEmpty: Bool { order.isEmpty }
  var count: Int { order.count }

  subscript(uid: String) -> Participant? { participants[uid] }

  /// Participants in join order.
  var members: [Participant] { order.compactMap { participants[$0] } }

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
    result.reserveCapacity(order.count)
    for uid in order {
      if let c = participants[uid]?.connection { result.append(c) }
    }
    recipients = result
    return result
  }

  func add(_ participant: Participant) {
    precondition(participants[participant.uid] == nil, "participant added twice")
    participants[participant.uid] = participant
    order.append(participant.uid)
    recipients = nil
  }

  func remove(_ uid: String) {
    guard participants.removeValue(forKey: uid) != nil else { return }
    order.removeAll { $0 == uid }
    recipients = nil
  }

  /// Points the participant at a (new) connection: join takeover, resume.
  func attach(_ participant: Participant, to c: ConnectionID) {
    participant.connection = c
    recipients = nil
  }

  /// The participant keeps its place but has no connection (§5 lost).
  func detach(_ participant: Participant) {
    participant.connection = nil
    recipients = nil
  }

  func handIndex(of uid: String) -> Int? { hands.firstIndex { $0.uid == uid } }
}

/// Where a connection is in its lifecycle (§4).
enum ConnectionPhase {
  /// Upgraded; only `hello` is accepted (§4.3).
  case awaitingHello
  /// `welcome` sent.
  case ready
  /// The core asked the shell to close it; further input is ignored.
  case closing
}

/// One WebSocket connection.
final class Connection {
  let id: ConnectionID
  var phase = ConnectionPhase.awaitingHello
  var identity: Identity?
  /// `welcome.connectionId` and `welcome.resumeToken` (set at hello).
  var publicId = ""
  var resumeToken = ""
  /// Sessions this connection is the member for, in join order (§7a: membership is
  /// per connection).
  var sessions: [String] = []
  /// §2 consecutive bad messages.
  var badMessages = 0
  /// §5 last `client.background` value (selects `backgroundGraceMs`).
  var background = false
  /// §5 liveness: monotonic ms of the last inbound frame.
  var lastInboundMonoMs: Int64

  init(id: ConnectionID, at: Instant) {
    self.id = id
    lastInboundMonoMs = at.monoMs
  }

  var uid: String? { identity?.uid }
}

/// Per user: the connections speaking for it (calls ring every one, §9) and sessions
/// it may join beyond its token's claim (§3: call sessions).
final class User {
  let uid: String
  var connections: [ConnectionID] = []
  var grantedSessions: Set<String> = []

  init(uid: String) { self.uid = uid }
}
