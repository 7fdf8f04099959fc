// The relay as a deterministic state machine (DESIGN.md, "Why the core is a pure state
// machine"): inputs carry their Instant, outputs are Effects drained by the shell.
//
// Decisions (see also protocol/PROTOCOL.md):
// - Dev mode (§3): every `hello.dev` user may join any session; its role is
//   `hello.dev.role` ("host"/"participant"), default participant.
// - Membership errors: a session command from a connection that is not the member
//   connection gets `not_in_session`, whether the session exists or not.
// - Endings: a clean close, and every close the core itself requests (4501, 4029),
//   leaves each session at once (`hand.lowered {left}` if up, `participant.left
//   {left}`). An unclean end (a socket gone without a close handshake, or one the
//   shell's heartbeats found silent and dropped) goes through `markLost`:
//   participants stay `lost` for grace (§5, Liveness.swift).
// - An emptied session is dropped; a session created by `createSession` lives until
//   it has been joined and emptied.
// - Ids drawn from `ids`, in this order per hello: connectionId (12 bytes), then
//   resumeToken (24 bytes); session ids 16 bytes.
public import RelayProtocol
import RelayPrimitives

/// The relay core. Not thread-safe: the shell calls it from its one loop thread.
public final class RelayCore {
  public let config: CoreConfig
  let ids: any IdentifierSource
  let verifyToken: (String, Int64) -> Identity?
  let decoderLimits = DecoderLimits()

  var connections = RefTable<ConnectionsById>()
  /// Per user, the connections speaking for it in hello order (calls ring every one,
  /// §9).
  var userConnections = RefTable<ConnectionsByUid>()
  /// Sessions a user may join beyond its token's claim (§3: call sessions), until the
  /// call that granted them is purged.
  var grantedSessions: [String: Set<String>] = [:]
  var sessions: [String: Session] = [:]
  var deadlines = DeadlineQueue()
  /// §5 lost records, grace and idle countdowns; §8 held state (Liveness.swift).
  var liveness = LivenessState()
  var effects: [Effect] = []
  /// §5.6 membership events waiting for the end of the turn (PresenceDiff.swift).
  var presenceDiffs = PresenceDiffs()
  /// Open connections that accepted `presence.diff`: none, and membership events take
  /// the plain path.
  var presenceDiffCapable = 0
  var counters = CoreStats()
  /// What the last snapshot captured, reused by the next (SnapshotCache.swift).
  var snapshotCache = SnapshotCache()
  /// §9 ringing state (CallsModel.swift).
  var calls = CallBook()
  /// §9a push registrations (PushRegistry.swift).
  var push = PushRegistry()
  /// §6 join/leave windows of connections that joined or left (JoinRate.swift);
  /// looked up only, dropped at `closed`.
  /// §8 replay bytes of all sessions (ReplayBudget.swift).
  let replayBudget: ReplayBudget

  /// `verifyToken(token, nowWallMs)` returns the identity of a valid token, nil for a
  /// refused one (→ close 4501, §3). Unused in dev mode.
  public init(
    config: CoreConfig, ids: any IdentifierSource,
    verifyToken: @escaping (String, Int64) -> Identity?
  ) {
    self.config = config
    replayBudget = ReplayBudget(maxBytes: config.replayBudgetBytes)
    self.ids = ids
    self.verifyToken = verifyToken
  }

  // MARK: Transport inputs

  /// The WebSocket upgrade completed: the `hello` deadline starts (§1).
  public func open(_ c: ConnectionID, at: Instant) {
    precondition(connections[c] == nil, "connection \(c) opened twice")
    let connection = Connection(id: c, at: at)
    connections[c] = connection
    snapshotTouch(connection)
    counters.connections += 1
    deadlines.scheduleHello(at: at.monoMs + config.helloTimeoutMs, c)
  }

  /// One complete inbound text message.
  public func receive(_ c: ConnectionID, text: [UInt8], at: Instant) {
    text.withUnsafeBytes { receive(c, text: $0, at: at) }
  }

  /// `receive(_:text:at:)` for a message borrowed from the shell's read buffer,
  /// valid during the call: nothing of it is kept but what the decoder copies out.
  public func receive(_ c: ConnectionID, text: UnsafeRawBufferPointer, at: Instant) {
    guard let connection = connections[c], connection.phase != .closing else { return }
    connection.lastInboundMonoMs = at.monoMs
    snapshotTouch(connection)  // and whatever the message changes in it
    switch CommandDecoder.decode(text, limits: decoderLimits) {
    case .failure(let error):
      rejectBadMessage(connection, error, at: at)
    case .success(let envelope):
      counters.commandsByType[envelope.command.typeName, default: 0] += 1
      dispatch(envelope, on: connection, at: at)
    }
  }

  /// The transport is gone. Called exactly once per opened connection, also after the
  /// core itself asked for `.close`. `clean`: a close handshake happened.
  public func closed(_ c: ConnectionID, clean: Bool, at: Instant) {
    guard let connection = connections.removeValue(forKey: c) else { return }
    // Gone from both tables at once: a closed connection speaks for no user, also
    // while its sessions are left below, and its resume token now works only through
    // a `LostRecord` (§8 grace).
    if let uid = connection.uid {
      userConnections.remove(connection)
      snapshotTouch(user: uid)
    }
    snapshotTouch(connection)
    counters.connections -= 1
    if connection.acceptsPresenceDiff { presenceDiffCapable -= 1 }
    if connection.phase != .closing {
      if clean { detachLeaving(connection, at: at) } else { markLost(connection, at: at) }
    }
    callsConnectionClosed(connection, clean: clean, at: at)
    pushDeviceMayBeAsleep(connection, at: at)
    // Whatever still holds it (a call's ringing list, a pending diff) reads it as gone.
    connection.phase = .closing
  }

  /// Fires the deadlines due at `at.monoMs`, oldest first, but at most
  /// `maxDeadlinesPerTick` of them and only while the events they caused reached
  /// fewer than `maxTickDeliveries` recipients: a mass expiry (grace ends, idle
  /// ends, ring timeouts of thousands) is spread over several calls so that
  /// no loop turn has to carry all of it. The rest stay due, so `nextDeadline` is
  /// already past and the shell calls again on its next turn. Counted, never timed:
  /// replicas applying the same log fire the same deadlines in the same calls.
  public func tick(at: Instant) {
    let deliveriesBefore = counters.deliveries
    var fired = 0
    while fired < config.maxDeadlinesPerTick, counters.deliveries &- deliveriesBefore < UInt64(config.maxTickDeliveries),
      let deadline = deadlines.popDue(at.monoMs)
    {
      fire(deadline.kind, at: at)
      fired += 1
    }
  }

  /// Monotonic ms of the earliest deadline still wanted; the shell arms one timer to it.
  public var nextDeadline: Int64? {
    while let first = deadlines.first, !isWanted(first.kind) { deadlines.popFirst() }
    return deadlines.first?.atMonoMs
  }

  /// Drains the effects produced so far, in order. Called between inputs, so also
  /// where the snapshot cache catches up with what they changed (SnapshotCache.swift).
  public func takeEffects() -> [Effect] {
    snapshotSettle()
    defer { effects.removeAll(keepingCapacity: true) }
    return effects
  }

  /// Counters for `/metrics` (§10).
  public var stats: CoreStats {
    var snapshot = counters
    snapshot.sessions = sessions.count
    snapshot.participants = sessions.values.reduce(0) { $0 + $1.count }
    snapshot.replayBytes = replayBudget.bytes
    snapshot.replayEvictions = replayBudget.evictions
    return snapshot
  }

  // MARK: Output helpers

  func send(_ payload: Payload, to recipients: [ConnectionID], type: String) {
    counters.eventsByType[type, default: 0] += 1
    guard !recipients.isEmpty else { return }
    if overtakesPresenceDiff(recipients) { flushPresenceDiffs() }
    effects.append(.send(payload, to: recipients))
  }

  /// A personal message to one connection.
  func sendPersonal(_ c: ConnectionID, type: String, re: String? = nil, _ body: (inout JSONWriter) -> Void = { _ in }) {
    send(makeMessage(type: type, re: re, body), to: [c], type: type)
  }

  func sendError(_ c: ConnectionID, code: ErrorCode, message: String, re: String?) {
    counters.errorsByCode[code.rawValue, default: 0] += 1
    sendPersonal(c, type: "error", re: re) { w in
      w.field("code", code.rawValue)
      w.field("message", message)
    }
  }

  /// Asks the shell to close; the connection leaves its sessions at once (as a clean
  /// leave) and ignores further input until `closed`.
  func close(_ connection: Connection, code: UInt16, reason: String, at: Instant) {
    guard connection.phase != .closing else { return }
    detachLeaving(connection, at: at)
    connection.phase = .closing
    snapshotTouch(connection)
    effects.append(.close(connection.id, code: code, reason: reason))
  }

  /// §2: bad messages are answered, counted, and close with 4029 when consecutive ones
  /// reach `maxBadMessages`.
  func rejectBadMessage(_ connection: Connection, _ error: CommandError, at: Instant) {
    sendError(connection.id, code: error.code, message: error.message, re: error.re)
    if connection.badMessages < Int32.max { connection.badMessages += 1 }
    if Int(connection.badMessages) >= config.maxBadMessages {
      close(connection, code: CloseCode.tooManyBadMessages, reason: "too many bad messages", at: at)
    }
  }
}
