// One simulated client: its identity, connection lifecycle (connect, hello,
// join, resume) and what it does with each message it receives. The protocol
// itself is RelayClientCore's `ClientMachine`, the one apps use: hello and
// resume (§3, §8), command encoding and reply matching (§2), the reconnect
// decision on a close code and its backoff (§2). The bot carries out the
// machine's effects over its own connection (BotConnection.swift) and checks
// every message it receives before any client logic sees it (Checks.swift).
// Behaviours (BotBehaviours.swift), replies and lifecycle events
// (BotProtocol.swift) and calls (BotCalls.swift) extend it.

import EventLoop
import RelayClientCore
import RelayProtocol
import RelayWebSocket
import RelayPrimitives

final class Bot {
  enum Phase: Equatable {
    case offline  // not connected (before start, or between drop and resume)
    case connecting  // TCP + upgrade + hello in progress
    case ready  // welcomed (relay) or upgraded (broadcast)
    case silent  // connection open but the bot stopped reading (vanish)
    case leaving  // clean close in progress at the end of the run
    case done  // finished for good
  }

  /// What an `id`-carrying command was, to interpret its reply.
  enum CommandKind {
    case join, leave, hand, hostLower, message
    case callInitiate(callees: [String]), callAccept(String), callReject(String, reason: String)
    case callCancel(String), callEnd(String)

    var name: String {
      switch self {
      case .join: "session.join"
      case .leave: "session.leave"
      case .hand: "hand.raise/lower"
      case .hostLower: "hand.lower(host)"
      case .message: "message.send"
      case .callInitiate: "call.initiate"
      case .callAccept: "call.accept"
      case .callReject: "call.reject"
      case .callCancel: "call.cancel"
      case .callEnd: "call.end"
      }
    }
  }

  struct Pending {
    var kind: CommandKind
    var sentNs: UInt64
  }

  let index: Int
  let uid: String
  let name: String
  let isHost: Bool
  let session: String
  // Strong: the context holds no bot, so there is no cycle, and a strong
  // `let` is read without reference counting. An `unowned` reference cost
  // an atomic retain/release pair per access, several per delivery.
  let ctx: RunContext
  /// The engine, for room-level bookkeeping (publishers, broadcast rooms);
  /// unowned because the engine holds the bots.
  unowned let engine: Engine
  /// The context's counters and checks, held directly for the same reason.
  let stats: Stats
  let checker: Checker
  /// Copies of run options read on every delivery.
  let wire: WireProtocol
  let traced: Bool
  let fault: Fault?

  @exclusivity(unchecked) var phase = Phase.offline
  var conn: BotConnection?
  /// Set while a reconnect carries `resume`; `expectResumed` when within grace.
  @exclusivity(unchecked) var resuming = false
  var expectResumed = false
  /// Loop time from which the relay may hold this user lost (when the
  /// connection last heard from it, see `BotConnection.quietSince`): grace
  /// (§5) runs from no earlier than this, so a resume welcomed more than
  /// grace after it cannot be expected to resume.
  var lostSinceMs: UInt64 = 0
  /// A rejoin is due after a leave, or the bot left on purpose.
  var leftOnPurpose = false
  // Unchecked exclusivity (see `Stats`): updated on every delivered event;
  // SessionView's methods touch only the view and the checker.
  @exclusivity(unchecked) var view: SessionView
  let ledger: MessageLedger
  /// UTF-8 of the uid, compared against matched bytes on the hot path.
  let uidBytes: [UInt8]
  let messageLayout: MessageLayout
  /// Commands awaiting their reply, by the request id given to the machine.
  var pending: [UInt64: Pending] = [:]
  var nextRequestId: UInt64 = 0
  /// When the latest hello went out (hrtime ns), to time its welcome.
  var helloSentNs: UInt64 = 0
  /// Replies (ok or error) the machine matched to a command, to tell an
  /// `error` that answered nothing of ours.
  var repliesMatched = 0
  var recentHandMs: [UInt64] = []
  var recentMessageMs: [UInt64] = []
  var recentCallMs: [UInt64] = []
  @exclusivity(unchecked) var isPublisher = false
  var inflight = 0
  var background = false
  /// A scheduled resume or rejoin is due: the engine picks someone else.
  var busy = false
  /// First time this bot reached `ready` (ramp-up accounting).
  var everReady = false
  /// When the first connection attempt began (hrtime ns), for the ramp's
  /// connect-to-ready latency.
  var firstConnectNs: UInt64 = 0
  /// The silent connection a resume replaces, reset once welcomed.
  var previousConn: BotConnection?
  /// Calls this bot placed and may cancel, and calls it accepted.
  var placedCalls: [String] = []
  /// Which of `--url` this bot uses now (round-robin start, next on reconnect).
  var urlIndex: Int
  /// The relay protocol's client side (unused by the broadcast wire). Last of
  /// the stored properties: a large value, kept after the fields every delivery
  /// reads so that those stay on the same few cache lines.
  var machine: ClientMachine

  init(index: Int, uid: String, isHost: Bool, session: String, ctx: RunContext, engine: Engine) {
    self.index = index
    self.uid = uid
    self.name = "Bot \(index)"
    self.isHost = isHost
    self.session = session
    self.ctx = ctx
    self.engine = engine
    stats = ctx.stats
    checker = ctx.checker
    wire = ctx.options.wire
    traced = ctx.options.traceUid == uid
    fault = ctx.options.fault
    view = SessionView(session: session)
    ledger = ctx.ledger(for: session)
    uidBytes = Array(uid.utf8)
    messageLayout = wire == .relay ? .relay(session: session) : .broadcast()
    urlIndex = index % ctx.options.urls.count
    // Jitter seeded from the run's seed (reproducible), apart per bot, without
    // drawing from the run's own random sequence.
    machine = ClientMachine(
      configuration: Self.configuration(uid: uid, name: name, isHost: isHost),
      seed: ctx.options.seed &* 0x9E37_79B9_7F4A_7C15 &+ UInt64(index))
  }

  /// Dev identity up front; a token is minted for each hello instead (`opened`).
  /// The backoff is the machine's full jitter, with the bots' own scale: 100 ms
  /// doubling to 4 s, so `maxDropRetries` attempts span about 15 s on average.
  private static func configuration(uid: String, name: String, isHost: Bool) -> ClientConfiguration {
    var c = ClientConfiguration(auth: .dev(uid: uid, name: name, role: isHost ? "host" : "participant"))
    c.offersPresenceDiff = false  // the bots count and check per-member events (Checks.swift)
    c.backoffBaseMs = 100
    c.backoffCapMs = 4_000
    return c
  }

  deinit { messageLayout.deallocate() }

  var isActive: Bool { phase == .ready && !busy && (view.member || ctx.options.wire == .broadcast) }

  // MARK: connection lifecycle

  /// Loop time as the machine takes it.
  var machineNowMs: Int64 { Int64(ctx.nowMs) }

  /// The first connection: the machine asks for a transport (relay), or the
  /// bot opens one (broadcast).
  func connect() {
    if firstConnectNs == 0 { firstConnectNs = Loop.hrtimeNs() }
    resuming = false
    switch wire {
    case .relay: perform(machine.connect(nowMs: machineNowMs))
    case .broadcast: openConnection()
    }
  }

  /// Carries out the machine's effects, in order.
  func perform(_ effects: [ClientEffect]) {
    for effect in effects {
      switch effect {
      case .openTransport: openConnection()
      case .send(let bytes): sendText(bytes)
      case .closeTransport(let code):
        if let code {
          conn?.close(code: code)
        } else {
          conn?.abandon()
          conn = nil
        }
      case .reply(let requestID, let result): replied(requestID, result)
      case .event: break  // the bot reads the relay's own messages (BotProtocol.swift)
      }
    }
  }

  private func openConnection() {
    let c = BotConnection(loop: ctx.loop, stats: ctx.stats, maxMessageBytes: ctx.options.maxMessageBytes)
    conn = c
    phase = .connecting
    c.onOpen = { [unowned self] in self.opened() }
    // Unretained: the bot outlives its connections' callbacks (`detach`,
    // `abandon` and the end of a connection all clear them), and taking a
    // reference per delivered message was a measurable cost.
    let me = Unmanaged.passUnretained(self)
    c.onText = { bytes, at in me._withUnsafeGuaranteedRef { $0.received(bytes, at: at) } }
    c.onEnd = { [unowned self] end in self.ended(end) }
    c.stallMs = 2 * UInt64(ctx.heartbeatIntervalMs)
    let url = ctx.options.urls[urlIndex]
    switch wire {
    case .relay: c.open(url: url, path: url.path, subprotocol: "relay.v1", source: index, tls: ctx.options.tls)
    case .broadcast: c.open(url: url, path: "/" + session, subprotocol: nil, source: index, tls: ctx.options.tls)
    }
  }

  private func opened() {
    switch wire {
    case .broadcast:
      phase = .ready
      ctx.stats.ready += 1
      engine.botBecameReady(self)
    case .relay:
      // The fast path applies message events without the machine: give it the
      // bot's position, so a resume asks for what follows it (§8).
      if view.member { machine.sessionEventsApplied(session: session, through: Int64(view.lastSeq)) }
      if case .token(let minter) = ctx.options.identity {
        let now = Int(Loop.wallClockMs() / 1000)
        machine.setAuth(.token(minter.token(uid: uid, name: name, role: isHost ? "host" : "participant", nowSeconds: now)))
      }
      helloSentNs = Loop.hrtimeNs()
      perform(machine.transportOpened(nowMs: machineNowMs))
    }
  }

  private func ended(_ end: ConnectionEnd) {
    if phase == .ready { ctx.stats.ready -= 1 }
    let was = phase
    let quietSinceMs = conn?.quietSince(nowMs: ctx.nowMs) ?? ctx.nowMs
    conn = nil
    pending.removeAll()
    if phase == .leaving { phase = .done; engine.botClosed(self); return }
    phase = .offline
    guard was != .done else { return }
    if wire == .relay {
      // §2: the machine decides between reconnecting and stopping for good. A
      // vanished bot already has its resume scheduled; that one takes over.
      perform(machine.transportClosed(code: end.code, reason: end.reason, nowMs: machineNowMs))
      if was == .silent { return }
      // An app's machine also retries codes §14 gives no rule for (1002, 1009, …);
      // a load test reports them: each is a relay or bot bug to look at.
      if machine.connectionState != .closed, engine.acceptsReconnects,
        CloseCode.reconnect(after: end.code) == .resume
      {
        reconnectAfterDrop(end, was: was, quietSinceMs: quietSinceMs)
        return
      }
    }
    ctx.checker.fail(
      .connection, "\(uid): connection ended (code \(end.code.map(String.init) ?? "none"), \(end.reason))")
    view.closeInterval()
    engine.botLost(self)
  }

  /// End of run: a clean close handshake (close code 1000, the machine's
  /// `disconnect`).
  func closeCleanly() {
    if phase == .connecting || phase == .silent, let conn {
      // Not welcomed yet, or not reading (it would never see the reply):
      // nothing to hand over cleanly; drop it.
      conn.abandon()
      self.conn = nil
      stopMachine()
      phase = .done
      engine.botClosed(self)
      return
    }
    guard conn != nil, phase == .ready else {
      stopMachine()
      if phase != .leaving { phase = .done; engine.botClosed(self) }
      return
    }
    ctx.stats.ready -= 1
    phase = .leaving
    switch wire {
    case .relay: perform(machine.disconnect(nowMs: machineNowMs))
    case .broadcast: conn?.close(code: CloseCode.normal)
    }
  }

  /// No more reconnects; with no connection left, nothing goes out.
  private func stopMachine() {
    guard wire == .relay else { return }
    perform(machine.disconnect(nowMs: machineNowMs))
  }

  // MARK: sending

  /// Issues a command through the machine, registered for its reply.
  func send(_ command: ClientCommand, kind: CommandKind) {
    guard conn != nil else { return }
    nextRequestId += 1
    pending[nextRequestId] = Pending(kind: kind, sentNs: Loop.hrtimeNs())
    perform(machine.command(command, requestID: nextRequestId, nowMs: machineNowMs))
  }

  /// One text message out: a command the machine encoded, or a broadcast frame.
  func sendText(_ bytes: [UInt8]) {
    guard let conn else { return }
    ctx.stats.commandsSent += 1
    if traced { log("-> \(uid): " + String(decoding: bytes, as: UTF8.self)) }
    conn.sendText(bytes)
  }

  func sendJoin() {
    send(.joinSession(session), kind: .join)
  }

  // MARK: receiving

  private func received(_ bytes: UnsafeRawBufferPointer, at receivedNs: UInt64) {
    ctx.sawEvent()
    if traced { log("<- \(uid): " + String(decoding: bytes, as: UTF8.self)) }
    guard phase != .silent else { return }
    if let m = messageLayout.match(bytes) {
      for _ in 0..<faultCopies() { delivered(m, bytes, at: receivedNs) }
      return
    }
    let ev: JSONValue
    do { ev = try JSONParser.parse(bytes) } catch {
      ctx.checker.fail(.connection, "\(uid): unparsable message: \(error)")
      return
    }
    switch wire {
    case .broadcast:
      stats.messageLayoutMisses += 1
      for _ in 0..<faultCopies() { receivedBroadcast(ev) }
    case .relay: dispatch(ev)
    }
  }

  /// How many times to handle a message event: once, or under `--fault` none
  /// (a lost delivery) or twice (a repeated one), before any check sees it.
  private func faultCopies() -> Int {
    guard let fault else { return 1 }
    ctx.faultCounter += 1
    guard ctx.faultCounter % fault.every == 0 else { return 1 }
    return fault.kind == .dropMessage ? 0 : 2
  }

  /// A message event matched in place (MessageLayout.swift): checked, ledgered
  /// and timed without building a JSON value.
  private func delivered(_ m: MessageMatch, _ b: UnsafeRawBufferPointer, at receivedNs: UInt64) {
    // Only a publisher acts on its own messages coming back.
    let fromMe = isPublisher && b.slice(m.from, equals: uidBytes)
    guard let seq = m.seq else {
      countDelivery(sentNs: m.sentNs, fromMe: fromMe, at: receivedNs)
      return
    }
    guard view.advance(seq: seq, type: "message", uid: uid, checker: checker) else { return }
    ledger.seqs.insert(seq)
    view.messagesReceived += 1
    countDelivery(sentNs: m.sentNs, fromMe: fromMe, at: receivedNs)
  }

  /// Session events are the bot's to check (§2: every seq exactly once, in
  /// order, even the ones a client would drop); personal events go to the
  /// machine, then to the bot's checks.
  private func dispatch(_ ev: JSONValue) {
    guard let type = ev["type"]?.stringValue else {
      ctx.checker.fail(.connection, "\(uid): message without type")
      return
    }
    guard let seq = ev["seq"]?.int, let s = ev["session"]?.stringValue, isSessionEvent(type) else {
      personalEvent(type: type, ev)
      return
    }
    guard s == session else {
      ctx.checker.fail(.seqContinuity, "\(uid): event for foreign session \(s)")
      return
    }
    var copies = 1
    if type == "message" {
      stats.messageLayoutMisses += 1
      copies = faultCopies()
    }
    for _ in 0..<copies { sessionEvent(type: type, seq: seq, ev) }
  }

  private func isSessionEvent(_ type: String) -> Bool {
    type == "message" || type.hasPrefix("hand") || type.hasPrefix("participant.")
  }

  private func sessionEvent(type: String, seq: Int, _ ev: JSONValue) {
    guard view.advance(seq: seq, type: type, uid: uid, checker: ctx.checker) else { return }
    let subject = ev["uid"]?.stringValue ?? ev["participant"]?["uid"]?.stringValue ?? ""
    let kind = EventKind(rawValue: type) ?? .other
    view.apply(kind, subject: subject, raisedAt: ev["raisedAt"]?.double ?? 0, me: uid, checker: ctx.checker)
    switch kind {
    case .message: receivedMessage(seq: seq, ev)
    case .handRaised, .handLowered: timeHandEvent(seq: seq, subject: subject)
    default: break
    }
  }

  private func personalEvent(type: String, _ ev: JSONValue) {
    let matchedBefore = repliesMatched
    if let message = ev.objectValue { perform(machine.received(message: message, nowMs: machineNowMs)) }
    switch type {
    case "error":
      // The machine matched errors to commands (`replied`); any other answered
      // nothing the bots sent with an id.
      guard repliesMatched == matchedBefore else { return }
      let code = ev["code"]?.stringValue ?? "?"
      ctx.unexpectedError(code: code, command: "(no id)", uid: uid, message: ev["message"]?.stringValue ?? "")
    case "welcome": welcomed(ev)
    case "session.joined": joined(ev)
    case "session.resumed": resumedSession(ev)
    case "session.left": leftSession(ev)
    case "session.idle_warning", "session.timed_out": ctx.checker.note("a session idled (\(type))")
    default:
      if type.hasPrefix("call.") { callEvent(type: type, ev) }
    }
  }
}
