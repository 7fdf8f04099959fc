// The client side of the protocol as a deterministic state machine (DESIGN.md,
// "Why the core is a pure state machine", applied to the client): inputs are
// transport events, app commands and time; outputs are `ClientEffect`s. No
// sockets, no clock, no unseeded randomness: the shell passes `nowMs` (monotonic)
// and the seed, so every rule here is testable without a relay.

import RelayProtocol
import RelayPrimitives

/// Tunables of the client. Durations in ms, like the protocol.
public struct ClientConfiguration: Sendable {
  /// Identity sent in `hello`.
  public var auth: RelayAuth
  /// The app install sent as `hello.device` (§4; `DeviceID.isValid`), nil for none.
  public var device: String?
  /// Full-jitter backoff: attempt n waits random(0, min(cap, base · 2ⁿ)) ms.
  public var backoffBaseMs: Int64 = 500
  /// Upper bound of one backoff delay.
  public var backoffCapMs: Int64 = 20_000
  /// Send `{"type":"ping"}` every heartbeat interval, for transports that hide
  /// WebSocket pings (§5; URLSession does).
  public var sendsAppPings = false
  /// How long one attempt may take from `openTransport` to `welcome`.
  public var connectTimeoutMs: Int64 = 10_000
  /// Offer `presence.diff` in `hello` (§4, §5.6): the relay may then coalesce a
  /// turn's membership events into one `participants.diff`, which the machine
  /// applies event by event, so the app sees the same per-member events.
  public var offersPresenceDiff = true

  /// A configuration with the default timings.
  public init(auth: RelayAuth) { self.auth = auth }
}

/// The client protocol machine. Not thread-safe: one owner (the transport's thread)
/// feeds it; the shell copies `snapshot` out to the app.
public struct ClientMachine: Sendable {
  /// What the app's UI reads: connection state, sessions and calls.
  public struct Snapshot: Sendable, Equatable {
    /// Where the connection stands.
    public var connectionState: ConnectionState = .disconnected
    /// Joined sessions by id.
    public var sessions: [String: SessionState] = [:]
    /// Calls by id (terminal ones stay, with their final status).
    public var calls: [String: Call] = [:]
    /// The user the relay identified (from `welcome.user`).
    public var user: CallUser?
    /// `welcome.resumed` of the current connection: the relay still held this
    /// client's place (§9), after a drop or, with a restored record, a relaunch.
    public var resumed = false

    /// Disconnected, nothing joined.
    public init() {}
  }

  enum PendingKind: Sendable {
    case join(String)
    case leave(String)
    case initiate(to: [String], callType: CallType, metadata: JSONObject?)
    case other
  }

  struct Pending: Sendable {
    var requestID: UInt64?
    var kind: PendingKind
  }

  /// The state the app sees.
  public internal(set) var snapshot = Snapshot()
  /// The configuration in force.
  public private(set) var configuration: ClientConfiguration
  var random: SeededRandom
  /// Failed attempts since the last `welcome` (the backoff exponent).
  public internal(set) var attempt = 0
  var resumeToken: String?
  var heartbeatIntervalMs: Int64 = 10_000
  var heartbeatTimeoutMs: Int64 = 15_000
  /// A transport exists (opening or open) and will report back.
  var transportActive = false
  var welcomed = false
  var everWelcomed = false
  /// Set by `restore` until the next `welcome`: the stored place's user (inner nil:
  /// not recorded).
  var restoredUID: String??
  var lastInboundMs: Int64 = 0
  var lastPingMs: Int64 = 0
  /// When the next attempt starts, while waiting out a backoff delay.
  public internal(set) var reconnectAtMs: Int64?
  var connectDeadlineMs: Int64?
  var pending: [String: Pending] = [:]
  var queued: [(command: ClientCommand, requestID: UInt64?)] = []
  var nextWireID: UInt64 = 1
  var background = false
  /// Sessions re-joined after `welcome.resumed: false`: their `session.joined`
  /// replaces the old state, reported as a diff.
  var rejoining: Set<String> = []
  var joinReplies: [String: (requestID: UInt64, ok: JSONObject)] = [:]
  var leaveReplies: [String: (requestID: UInt64, ok: JSONObject)] = [:]
  var out: [ClientEffect] = []

  /// RFC 6455 §7.4.1 normal closure: what `disconnect()` sends, and (from the relay)
  /// one of the codes that end reconnecting (protocol/ §14, `CloseCode.reconnect`).
  static let normalClosure: UInt16 = CloseCode.normal

  /// `seed` drives the backoff jitter; pass a random value in production.
  public init(configuration: ClientConfiguration, seed: UInt64) {
    self.configuration = configuration
    random = SeededRandom(seed: seed)
  }

  /// The current connection state.
  public var connectionState: ConnectionState { snapshot.connectionState }

  /// The earliest time `tick` has something to do, or nil.
  public var nextDeadlineMs: Int64? {
    var deadlines: [Int64] = []
    if let reconnectAtMs { deadlines.append(reconnectAtMs) }
    if let connectDeadlineMs { deadlines.append(connectDeadlineMs) }
    if welcomed {
      deadlines.append(lastInboundMs + heartbeatTimeoutMs)
      if configuration.sendsAppPings { deadlines.append(lastPingMs + heartbeatIntervalMs) }
    }
    return deadlines.min()
  }

  // MARK: - App inputs

  /// Starts connecting (no-op unless `disconnected` or `closed`).
  public mutating func connect(nowMs: Int64) -> [ClientEffect] {
    guard connectionState == .disconnected || connectionState == .closed else { return [] }
    snapshot.connectionState = .connecting
    everWelcomed = false
    attempt = 0
    startAttempt(nowMs: nowMs)
    return flush()
  }

  /// Closes the connection cleanly (1000: the relay reports `participant.left` at
  /// once, §5) and stops reconnecting. Pending commands fail with `.notConnected`.
  public mutating func disconnect(nowMs: Int64) -> [ClientEffect] {
    guard connectionState != .disconnected else { return [] }
    if transportActive { out.append(.closeTransport(code: Self.normalClosure)) }
    transportActive = false
    welcomed = false
    reconnectAtMs = nil
    connectDeadlineMs = nil
    failAll(.notConnected)
    resumeToken = nil
    restoredUID = nil
    snapshot.sessions = [:]
    snapshot.calls = [:]
    snapshot.connectionState = .disconnected
    out.append(.event(.connectionClosed(code: Self.normalClosure, reason: "disconnect")))
    return flush()
  }

  /// Issues a command. With a `requestID` the reply comes back as a `.reply` effect
  /// (for `joinSession`/`leaveSession`, once `session.joined`/`session.left` has been
  /// applied, so the app's state already shows the result). While reconnecting the
  /// command waits for the next `welcome`.
  public mutating func command(_ command: ClientCommand, requestID: UInt64?, nowMs: Int64)
    -> [ClientEffect]
  {
    switch connectionState {
    case .disconnected, .closed:
      if let requestID { out.append(.reply(requestID: requestID, .failure(.notConnected))) }
    case .connecting, .reconnecting:
      queued.append((command, requestID))
    case .connected:
      send(command, requestID: requestID)
    }
    return flush()
  }

  /// Replaces the identity used by the next `hello`, e.g. a fresh token after the
  /// relay closed with 4501 (§14: "get a new token; do not retry blindly"). The
  /// current connection is left as it is.
  public mutating func setAuth(_ auth: RelayAuth) {
    configuration.auth = auth
  }

  /// Tells the relay the app goes to (or leaves) the background (§5): the relay then
  /// keeps a lost participant for `--background-grace`. Re-sent after reconnecting.
  public mutating func setBackground(_ isBackground: Bool, nowMs: Int64) -> [ClientEffect] {
    background = isBackground
    if welcomed { sendBackground() }
    return flush()
  }

  // MARK: - Transport inputs

  /// The WebSocket is open: send `hello` (with `resume` when there is a token, §8).
  public mutating func transportOpened(nowMs: Int64) -> [ClientEffect] {
    guard transportActive else { return [] }
    lastInboundMs = nowMs
    out.append(
      .send(
        CommandEncoding.hello(
          configuration.auth, device: configuration.device, resume: resumeRequest(),
          presenceDiff: configuration.offersPresenceDiff)))
    return flush()
  }

  /// The WebSocket ended: `code` is the relay's close code, nil when TCP ended
  /// without a close handshake (1006). Decides between reconnecting and stopping (§2).
  public mutating func transportClosed(code: UInt16?, reason: String, nowMs: Int64) -> [ClientEffect]
  {
    guard transportActive else { return [] }
    transportActive = false
    if let code, CloseCode.endsReconnecting(code) {
      stopForGood(code: code, reason: reason)
    } else {
      connectionDropped(nowMs: nowMs)
    }
    return flush()
  }

  /// A WebSocket ping or pong arrived: any inbound frame proves liveness (§5).
  public mutating func transportActivity(nowMs: Int64) {
    lastInboundMs = nowMs
  }

  /// Time passed: start a due attempt, give up on a slow one, detect silence,
  /// send an app-level ping.
  public mutating func tick(nowMs: Int64) -> [ClientEffect] {
    if let at = reconnectAtMs, at <= nowMs {
      reconnectAtMs = nil
      startAttempt(nowMs: nowMs)
    }
    if let deadline = connectDeadlineMs, deadline <= nowMs, !welcomed {
      abortTransport(nowMs: nowMs)
    }
    if welcomed, nowMs - lastInboundMs >= heartbeatTimeoutMs {
      abortTransport(nowMs: nowMs)
    }
    if welcomed, configuration.sendsAppPings, nowMs - lastPingMs >= heartbeatIntervalMs {
      lastPingMs = nowMs
      out.append(.send(CommandEncoding.ping()))
    }
    return flush()
  }

  // MARK: - Internals

  mutating func flush() -> [ClientEffect] {
    defer { out.removeAll() }
    return out
  }

  mutating func startAttempt(nowMs: Int64) {
    transportActive = true
    welcomed = false
    connectDeadlineMs = nowMs + configuration.connectTimeoutMs
    out.append(.openTransport)
  }

  /// The delay before the next attempt: full jitter over an exponential ceiling.
  public mutating func nextBackoffMs() -> Int64 {
    Backoff(baseMs: configuration.backoffBaseMs, capMs: configuration.backoffCapMs)
      .delayMs(attempt: attempt, using: &random)
  }

  /// Drops the socket without a close frame, so the relay treats the user as lost
  /// and keeps its state for the resume (§5: a close frame would be a clean leave).
  mutating func abortTransport(nowMs: Int64) {
    guard transportActive else { return }
    out.append(.closeTransport(code: nil))
    transportActive = false
    connectionDropped(nowMs: nowMs)
  }

  mutating func connectionDropped(nowMs: Int64) {
    welcomed = false
    connectDeadlineMs = nil
    failPending(.connectionLost)
    if connectionState == .connected {
      snapshot.connectionState = .reconnecting
      out.append(.event(.connectionLost))
    }
    reconnectAtMs = nowMs + nextBackoffMs()
    attempt += 1
  }

  mutating func stopForGood(code: UInt16, reason: String) {
    welcomed = false
    connectDeadlineMs = nil
    reconnectAtMs = nil
    failAll(.closed(code: code))
    snapshot.connectionState = .closed
    out.append(.event(.connectionClosed(code: code, reason: reason)))
  }

  mutating func failPending(_ error: RelayError) {
    for (_, p) in pending.sorted(by: { $0.key < $1.key }) {
      if let id = p.requestID { out.append(.reply(requestID: id, .failure(error))) }
    }
    pending = [:]
    for (_, r) in joinReplies { out.append(.reply(requestID: r.requestID, .failure(error))) }
    for (_, r) in leaveReplies { out.append(.reply(requestID: r.requestID, .failure(error))) }
    joinReplies = [:]
    leaveReplies = [:]
  }

  mutating func failAll(_ error: RelayError) {
    failPending(error)
    for q in queued {
      if let id = q.requestID { out.append(.reply(requestID: id, .failure(error))) }
    }
    queued = []
  }

  func resumeRequest() -> (token: String, sessions: [(String, Int64)])? {
    guard let resumeToken else { return nil }
    let sessions = snapshot.sessions.values.sorted { $0.id < $1.id }.map { ($0.id, $0.seq) }
    return (resumeToken, sessions)
  }

  mutating func send(_ command: ClientCommand, requestID: UInt64?) {
    let wireID = "c\(nextWireID)"
    nextWireID += 1
    let kind: PendingKind
    switch command {
    case .joinSession(let s): kind = .join(s)
    case .leaveSession(let s): kind = .leave(s)
    case .initiateCall(let to, let type, let metadata):
      kind = .initiate(to: to, callType: type, metadata: metadata)
    default: kind = .other
    }
    pending[wireID] = Pending(requestID: requestID, kind: kind)
    out.append(.send(CommandEncoding.encode(command, id: wireID)))
  }

  mutating func sendBackground() {
    out.append(.send(CommandEncoding.background(background)))
  }
}
