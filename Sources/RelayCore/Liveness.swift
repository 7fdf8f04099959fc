// §5 connection status: lost participants, grace and its expiry, idle countdowns.
// Every timer goes through the core's one DeadlineQueue (DESIGN.md, "The hot path").
// Heartbeats are not here: a socket's liveness is node-local, so the shell pings and
// times out its own sockets (RelayPrimitives `Heartbeats`) in every mode, and a dead
// socket reaches the core as the ordinary `closed(clean: false)` input — the same
// input standalone, with a data dir and clustered.
import RelayProtocol

/// The deadlines of §5 and §8, carried by the single `DeadlineKind.liveness` case so
/// the shared enum grows by one line.
enum LivenessDeadline: Equatable {
  /// The grace of a lost connection (its `LostRecord`) is over.
  case grace(record: UInt64)
  /// §5 idle countdown of a session: warning, then end. The generation names one
  /// countdown (`LivenessState.idleSession`); a cancelled one is simply gone from
  /// that table (lazy cancellation).
  case idleWarning(generation: UInt64)
  case idleEnd(generation: UInt64)

  static func == (a: LivenessDeadline, b: LivenessDeadline) -> Bool {
    switch (a, b) {
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
    snapshotTouch(connection)
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
      if let holder = tokenHolder(record.token, of: record.uid) {
        holder.tokenSpent = true
        snapshotTouch(holder)
      }
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
    case .grace(let record):
      return liveness.records[record] != nil
    case .idleWarning(let generation), .idleEnd(let generation):
      return liveness.idleSession[generation] != nil
    }
  }

  func fireLiveness(_ deadline: LivenessDeadline, at: Instant) {
    switch deadline {
    case .grace(let record): graceOver(record, at: at)
    case .idleWarning(let generation):
      if let id = liveness.idleSession[generation] { idleWarningDue(id, at: at) }
    case .idleEnd(let generation):
      if let id = liveness.idleSession[generation] { idleEnded(id, at: at) }
    }
  }
}
