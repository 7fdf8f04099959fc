// §5 heartbeats and connection status: server pings, the heartbeat timeout, lost
// participants, grace and its expiry. Every timer goes through the core's one
// DeadlineQueue (DESIGN.md, "The hot path"): a connection has exactly one heartbeat
// check outstanding (in the queue's heartbeat wheel), and an inbound frame only stores
// its time (O(1)) — the check re-arms itself from `lastInboundMonoMs` when it fires.
import RelayProtocol

/// The deadlines of §5 and §8, carried by the single `DeadlineKind.liveness` case so
/// the shared enum grows by one line.
enum LivenessDeadline: Equatable {
  /// Heartbeat check of one connection; `pingDueMs` is when its next ping is due. It
  /// holds the connection itself, so a check costs no lookup; a connection that is
  /// closed or closing no longer wants it.
  case heartbeat(Connection, pingDueMs: Int64)
  /// The grace of a lost connection (its `LostRecord`) is over.
  case grace(record: UInt64)
  /// §5 idle countdown of a session: warning, then end. The generation names one
  /// countdown (`LivenessState.idleSession`); a cancelled one is simply gone from
  /// that table (lazy cancellation).
  case idleWarning(generation: UInt64)
  case idleEnd(generation: UInt64)

  static func == (a: LivenessDeadline, b: LivenessDeadline) -> Bool {
    switch (a, b) {
    case (.heartbeat(let x, let p), .heartbeat(let y, let q)): return x === y && p == q
    case (.grace(let x), .grace(let y)): return x == y
    case (.idleWarning(let x), .idleWarning(let y)): return x == y
    case (.idleEnd(let x), .idleEnd(let y)): return x == y
    default: return false
    }
  }
}

/// One user in one session, as a dictionary key.
struct ParticipantKey: Hashable {
  let session: String
  let uid: String
}

/// What a lost connection leaves behind for its grace (§5) and for resume (§8).
struct LostRecord {
  let uid: String
  /// The connection's `resumeToken`: resume (§8) finds the held state by it.
  let token: ResumeToken
  /// Sessions whose participant went `lost` with this connection, in join order.
  let sessions: [String]
}

/// §5 idle countdown of a session with a single participant.
struct IdleCountdown {
  let generation: UInt64
  let endsAtMonoMs: Int64
}

/// The state of §5/§8 work, one stored property of the core. Dictionaries here are
/// only looked up, never iterated, so output order stays deterministic.
struct LivenessState {
  var records: [UInt64: LostRecord] = [:]
  var recordByToken: [ResumeToken: UInt64] = [:]
  /// Which record made a participant `lost`: a participant restored and lost again
  /// belongs to the newer record, and only that record's grace may time it out.
  var lostOwner: [ParticipantKey: UInt64] = [:]
  var nextRecord: UInt64 = 1
  var idle: [String: IdleCountdown] = [:]
  /// Running countdowns: generation → session id.
  var idleSession: [UInt64: String] = [:]
  var nextIdleGeneration: UInt64 = 1
  /// Observer of every session event as it is emitted, for the simulator's checks;
  /// the core's behaviour does not depend on it.
  var eventTap: ((String, Int64, Payload) -> Void)?
}

extension RelayCore {
  // MARK: Heartbeats (§5)

  /// Arms the first heartbeat check of a freshly upgraded connection. Pings start at
  /// the upgrade: a connection waiting for `hello` is also a socket that may die.
  func startHeartbeat(_ connection: Connection, at: Instant) {
    guard !config.heartbeatsInShell, config.heartbeatIntervalMs > 0 || config.heartbeatTimeoutMs > 0 else { return }
    scheduleHeartbeat(connection, lastInboundMs: at.monoMs, pingDueMs: at.monoMs + config.heartbeatIntervalMs)
  }

  /// The next check is the earlier of "ping due" and "timeout due"; a value ≤ 0
  /// disables that half. Checks are rounded up to a coarse quantum so that all the
  /// connections due in one quantum are pinged in one timer firing and one loop turn:
  /// 20 000 idle connections then cost tens of wake-ups per interval, not thousands,
  /// and their pongs arrive batched (uWebSockets times idle sockets the same way).
  private func scheduleHeartbeat(_ connection: Connection, lastInboundMs: Int64, pingDueMs: Int64) {
    var next = Int64.max
    if config.heartbeatIntervalMs > 0 { next = pingDueMs }
    if config.heartbeatTimeoutMs > 0 { next = min(next, lastInboundMs + config.heartbeatTimeoutMs) }
    let quantum = heartbeatQuantumMs
    if next < Int64.max - quantum { next = (next + quantum - 1) / quantum * quantum }
    deadlines.scheduleHeartbeat(at: next, connection, pingDueMs: pingDueMs)
  }

  /// A tenth of the shorter heartbeat setting, at most 1 000 ms: pings go out at most
  /// that late, and a silent connection is lost at most that long after its timeout.
  static func heartbeatQuantum(_ config: CoreConfig) -> Int64 {
    let settings = [config.heartbeatIntervalMs, config.heartbeatTimeoutMs].filter { $0 > 0 }
    guard let shortest = settings.min() else { return 1 }
    return max(1, min(1_000, shortest / 10))
  }

  /// A heartbeat check fired: lost if silent for `heartbeatTimeoutMs`, else ping if
  /// due, then re-arm from the latest inbound time (frames in between cost nothing).
  func heartbeatDue(_ connection: Connection, pingDueMs: Int64, at: Instant) {
    guard connection.phase != .closing else { return }
    let now = at.monoMs
    if config.heartbeatTimeoutMs > 0, now - connection.lastInboundMonoMs >= config.heartbeatTimeoutMs {
      heartbeatTimedOut(connection, at: at)
      return
    }
    var pingDue = pingDueMs
    if config.heartbeatIntervalMs > 0, now >= pingDue {
      effects.append(.ping(connection.id))
      pingDue = now + config.heartbeatIntervalMs
    }
    scheduleHeartbeat(connection, lastInboundMs: connection.lastInboundMonoMs, pingDueMs: pingDue)
  }

  /// §5: no inbound frame for the timeout → lost (not left). The socket is presumed
  /// dead, so the shell drops it without a close handshake (`.drop`): waiting for a
  /// close reply from a dead peer would only hold its buffers for the close timeout.
  func heartbeatTimedOut(_ connection: Connection, at: Instant) {
    if connection.phase == .ready { markLost(connection, at: at) }
    connection.phase = .closing
    pushDeviceMayBeAsleep(connection, at: at)
    effects.append(.drop(connection.id))
  }

  // MARK: Lost and grace (§5)

  /// The connection is lost: in each of its sessions the participant stays with
  /// status `lost`, hand and calls kept, and members get `participant.lost {uid}`
  /// (recorded, so a resume replays it to the user itself). Grace starts: `graceMs`,
  /// or `backgroundGraceMs` after `client.background {true}`.
  func markLost(_ connection: Connection, at: Instant) {
    guard let profile = connection.profile else { return }
    let uid = profile.uid
    let recordId = liveness.nextRecord
    liveness.nextRecord += 1
    var lostSessions: [String] = []
    for id in connection.sessions {
      guard let session = sessions[id], let participant = session[uid],
        participant.connection == connection.id
      else { continue }
      setConnection(participant, in: session, nil)  // now `lost`
      liveness.lostOwner[ParticipantKey(session: id, uid: uid)] = recordId
      lostSessions.append(id)
      counters.lost += 1
      emit(session, "participant.lost", at: at) { w in w.field("uid", uid) }
    }
    connection.sessions.removeAll()
    liveness.records[recordId] = LostRecord(uid: uid, token: profile.token, sessions: lostSessions)
    liveness.recordByToken[profile.token] = recordId
    let graceMs = connection.background ? config.backgroundGraceMs : config.graceMs
    deadlines.schedule(at: at.monoMs + graceMs, .liveness(.grace(record: recordId)))
  }

  /// §5 grace over: every participant still lost under this record gets
  /// `hand.lowered {timed_out}` (if up) and `participant.timed_out`, and is removed;
  /// the resume token stops working (§8 "after grace"). Calls end only if the user
  /// has no other live connection (a user online elsewhere has not timed out).
  func graceOver(_ recordId: UInt64, at: Instant) {
    guard let record = liveness.records.removeValue(forKey: recordId) else { return }
    if liveness.recordByToken[record.token] == recordId {
      liveness.recordByToken[record.token] = nil
      // Its connection may not be `closed` yet (a heartbeat drop in flight).
      tokenHolder(record.token, of: record.uid)?.tokenSpent = true
    }
    for id in record.sessions {
      let key = ParticipantKey(session: id, uid: record.uid)
      guard liveness.lostOwner[key] == recordId else { continue }
      liveness.lostOwner[key] = nil
      guard let session = sessions[id], let participant = session[record.uid],
        participant.status == .lost, participant.connection == nil
      else { continue }
      counters.timedOut += 1
      removeParticipant(participant, from: session, reason: .timedOut, by: nil, at: at)
    }
    // §9: a user with no other live connection has timed out for its calls too.
    if !isUserOnline(record.uid) { endCallsOfTimedOutUser(uid: record.uid, at: at) }
  }

  /// Points a participant at a connection, or at none while lost, through the
  /// session so its cached fan-out list follows.
  func setConnection(_ participant: Participant, in session: Session, _ c: ConnectionID?) {
    if let c { session.attach(participant, to: c) } else { session.detach(participant) }
  }

  // MARK: Ringing (§9)

  /// Whether the user has a live connection: said `hello`, not lost, not closing
  /// (§5: a lost user's connection counts as offline for ringing).
  func isUserOnline(_ uid: String) -> Bool {
    // A connection leaves this table only when `closed`, so `.ready` is all it takes.
    return userConnections.contains(key: uid) { $0.phase == .ready }
  }

  // MARK: Deadline routing

  func isLivenessWanted(_ deadline: LivenessDeadline) -> Bool {
    switch deadline {
    case .heartbeat(let connection, _):
      // `closed` leaves a connection `.closing` too.
      return connection.phase != .closing
    case .grace(let record):
      return liveness.records[record] != nil
    case .idleWarning(let generation), .idleEnd(let generation):
      return liveness.idleSession[generation] != nil
    }
  }

  func fireLiveness(_ deadline: LivenessDeadline, at: Instant) {
    switch deadline {
    case .heartbeat(let connection, let pingDueMs): heartbeatDue(connection, pingDueMs: pingDueMs, at: at)
    case .grace(let record): graceOver(record, at: at)
    case .idleWarning(let generation):
      if let id = liveness.idleSession[generation] { idleWarningDue(id, at: at) }
    case .idleEnd(let generation):
      if let id = liveness.idleSession[generation] { idleEnded(id, at: at) }
    }
  }
}
