// One simulated client: its identity, connection lifecycle (connect, hello,
// join, resume) and what it does with each message it receives. Behaviours
// (BotBehaviours.swift) and calls (BotCalls.swift) extend it.

import EventLoop
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
    case hello, join, leave, hand, hostLower, message, background, ping
    case callInitiate(callees: [String]), callAccept(String), callReject(String, reason: String)
    case callCancel(String), callEnd(String)

    var name: String {
      switch self {
      case .hello: "hello"
      case .join: "session.join"
      case .leave: "session.leave"
      case .hand: "hand.raise/lower"
      case .hostLower: "hand.lower(host)"
      case .message: "message.send"
      case .background: "client.background"
      case .ping: "ping"
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
  var resumeToken: String?
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
  /// UTF-8 of uid and session, compared against scanned bytes on the hot path.
  let uidBytes: [UInt8]
  let sessionBytes: [UInt8]
  let messageLayout: MessageLayout
  var pending: [Int: Pending] = [:]
  var nextCommandId = 0
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
  /// Reconnects after drops since the bot was last welcomed (bounded).
  var dropRetries = 0

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
    sessionBytes = Array(session.utf8)
    messageLayout = wire == .relay ? .relay(session: session) : .broadcast()
    urlIndex = index % ctx.options.urls.count
  }

  deinit { messageLayout.deallocate() }

  var isActive: Bool { phase == .ready && !busy && (view.member || ctx.options.wire == .broadcast) }

  // MARK: connection lifecycle

  /// Opens a new connection; with `resume`, the hello asks to resume (§8).
  func connect(resume: Bool = false) {
    let c = BotConnection(loop: ctx.loop, stats: ctx.stats, maxMessageBytes: ctx.options.maxMessageBytes)
    conn = c
    if firstConnectNs == 0 { firstConnectNs = Loop.hrtimeNs() }
    phase = .connecting
    resuming = resume
    c.onOpen = { [unowned self] in self.opened() }
    // Unretained: the bot outlives its connections' callbacks (`detach`,
    // `abandon` and the end of a connection all clear them), and taking a
    // reference per delivered message was a measurable cost.
    let me = Unmanaged.passUnretained(self)
    c.onText = { bytes, at in me._withUnsafeGuaranteedRef { $0.received(bytes, at: at) } }
    c.onEnd = { [unowned self] end in self.ended(end) }
    c.stallMs = 2 * UInt64(ctx.heartbeatIntervalMs)
    let url = ctx.options.urls[urlIndex]
    switch ctx.options.wire {
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
    case .relay: sendHello()
    }
  }

  private func ended(_ end: ConnectionEnd) {
    if phase == .ready { ctx.stats.ready -= 1 }
    let expected = phase == .leaving || phase == .done
    let was = phase
    let quietSinceMs = conn?.quietSince(nowMs: ctx.nowMs) ?? ctx.nowMs
    conn = nil
    pending.removeAll()
    if phase == .leaving { phase = .done; engine.botClosed(self); return }
    phase = .offline
    if !expected, wire == .relay, Self.meansReconnect(end.code), engine.acceptsReconnects {
      reconnectAfterDrop(end, was: was, quietSinceMs: quietSinceMs)
      return
    }
    if !expected {
      ctx.checker.fail(
        .connection, "\(uid): connection ended (code \(end.code.map(String.init) ?? "none"), \(end.reason))")
      view.closeInterval()
      engine.botLost(self)
    }
  }

  /// End of run: a clean close handshake (close code 1000).
  func closeCleanly() {
    if phase == .connecting || phase == .silent, let conn {
      // Not welcomed yet, or not reading (it would never see the reply):
      // nothing to hand over cleanly; drop it.
      conn.abandon()
      self.conn = nil
      phase = .done
      engine.botClosed(self)
      return
    }
    guard let conn, phase == .ready || phase == .silent else {
      if phase != .leaving { phase = .done; engine.botClosed(self) }
      return
    }
    if phase == .ready { ctx.stats.ready -= 1 }
    phase = .leaving
    conn.close(code: CloseCode.normal)
  }

  // MARK: sending

  /// Sends a command, registering it for its reply when `kind` is given.
  func send(_ build: (inout JsonWriter) -> Void, type: StaticString, kind: CommandKind?) {
    guard let conn else { return }
    var w = JsonWriter(capacity: 160)
    w.raw("{\"type\":\"")
    w.raw(type)
    w.raw("\"")
    if let kind {
      nextCommandId += 1
      w.raw(",\"id\":\"")
      w.int(nextCommandId)
      w.raw("\"")
      pending[nextCommandId] = Pending(kind: kind, sentNs: Loop.hrtimeNs())
    }
    build(&w)
    w.raw("}")
    ctx.stats.commandsSent += 1
    if ctx.options.traceUid == uid { log("-> \(uid): " + String(decoding: w.bytes, as: UTF8.self)) }
    conn.sendText(w.bytes)
  }

  private func sendHello() {
    let resumeTo = resuming ? resumeToken : nil
    send(
      { w in
        switch ctx.options.identity {
        case .dev:
          w.raw(",\"dev\":{\"uid\":")
          w.string(uid)
          w.raw(",\"name\":")
          w.string(name)
          w.raw(",\"role\":")
          w.string(isHost ? "host" : "participant")
          w.raw("}")
        case .token(let minter):
          let now = Int(Loop.wallClockMs() / 1000)
          w.raw(",\"token\":")
          w.string(minter.token(uid: uid, name: name, role: isHost ? "host" : "participant", nowSeconds: now))
        }
        if let resumeTo {
          w.raw(",\"resume\":{\"token\":")
          w.string(resumeTo)
          w.raw(",\"sessions\":{")
          if view.member {
            w.string(session)
            w.raw(":")
            w.int(view.lastSeq)
          }
          w.raw("}}")
        }
      }, type: "hello", kind: .hello)
  }

  func sendJoin() {
    send({ w in w.raw(",\"session\":"); w.string(session) }, type: "session.join", kind: .join)
  }

  // MARK: receiving

  private func received(_ bytes: UnsafeRawBufferPointer, at receivedNs: UInt64) {
    ctx.sawEvent()
    if traced { log("<- \(uid): " + String(decoding: bytes, as: UTF8.self)) }
    guard phase != .silent else { return }
    if let m = messageLayout.match(bytes) {
      if fastPath(m, bytes, at: receivedNs) { return }
    } else if let m = EventScan.scan(bytes) {
      if m.kind == .message || (wire == .broadcast && m.kind == nil) { stats.messageLayoutMisses += 1 }
      if fastPath(m, bytes, at: receivedNs) { return }
    }
    let ev: JSONValue
    do { ev = try JSONParser.parse(Array(bytes)) } catch {
      ctx.checker.fail(.connection, "\(uid): unparsable message: \(error)")
      return
    }
    switch wire {
    case .broadcast: receivedBroadcast(ev)
    case .relay: dispatch(ev)
    }
  }

  /// Session events and broadcast frames without building a JSON value;
  /// false hands the bytes to the full parser (replies, personal events,
  /// anything for another session).
  private func fastPath(_ m: EventScan, _ b: UnsafeRawBufferPointer, at receivedNs: UInt64) -> Bool {
    if let fault, m.kind == .message || (wire == .broadcast && m.kind == nil) {
      ctx.faultCounter += 1
      if ctx.faultCounter % fault.every == 0 {
        switch fault.kind {
        case .dropMessage: return true
        case .duplicateMessage: _ = checkedDelivery(m, b, at: receivedNs)
        }
      }
    }
    return checkedDelivery(m, b, at: receivedNs)
  }

  private func checkedDelivery(_ m: EventScan, _ b: UnsafeRawBufferPointer, at receivedNs: UInt64) -> Bool {
    switch wire {
    case .broadcast:
      guard m.kind == nil, let from = m.from else { return false }
      // Only a publisher acts on its own messages coming back.
      countDelivery(sentNs: m.sentNs, fromMe: isPublisher && b.slice(from, equals: uidBytes), at: receivedNs)
      return true
    case .relay:
      guard let kind = m.kind, kind != .other, let seq = m.seq, let s = m.session,
        m.sessionChecked || b.slice(s, equals: sessionBytes)
      else { return false }
      guard view.advance(seq: seq, type: kind.rawValue, uid: uid, checker: checker) else { return true }
      if kind == .message {
        ledger.seqs.insert(seq)
        view.messagesReceived += 1
        let fromMe = isPublisher && (m.from.map { b.slice($0, equals: uidBytes) } ?? false)
        countDelivery(sentNs: m.sentNs, fromMe: fromMe, at: receivedNs)
        return true
      }
      let subject = m.uid.map { b.string($0) } ?? ""
      view.apply(kind, subject: subject, raisedAt: m.raisedAt, me: uid, checker: checker)
      if kind == .handRaised || kind == .handLowered { timeHandEvent(seq: seq, subject: subject) }
      return true
    }
  }

  private func dispatch(_ ev: JSONValue) {
    guard let type = ev["type"]?.stringValue else {
      ctx.checker.fail(.connection, "\(uid): message without type")
      return
    }
    if let seq = ev["seq"]?.int, ev["session"]?.stringValue != nil, isSessionEvent(type) {
      guard ev["session"]?.stringValue == session else {
        ctx.checker.fail(.seqContinuity, "\(uid): event for foreign session \(ev["session"]?.stringValue ?? "")")
        return
      }
      if view.advance(seq: seq, type: type, uid: uid, checker: ctx.checker) {
        let subject = ev["uid"]?.stringValue ?? ev["participant"]?["uid"]?.stringValue ?? ""
        let kind = EventKind(rawValue: type) ?? .other
        view.apply(kind, subject: subject, raisedAt: ev["raisedAt"]?.double ?? 0, me: uid, checker: ctx.checker)
        sessionEvent(type: type, seq: seq, ev)
      }
      return
    }
    personalEvent(type: type, ev)
  }

  private func isSessionEvent(_ type: String) -> Bool {
    type == "message" || type.hasPrefix("hand") || type.hasPrefix("participant.")
  }

  private func sessionEvent(type: String, seq: Int, _ ev: JSONValue) {
    switch type {
    case "message": receivedMessage(seq: seq, ev)
    case "hand.raised", "hand.lowered": timeHandEvent(seq: seq, subject: ev["uid"]?.stringValue ?? "")
    default: break
    }
  }

  private func personalEvent(type: String, _ ev: JSONValue) {
    switch type {
    case "ok", "error": reply(type: type, ev)
    case "welcome": welcomed(ev)
    case "session.joined": joined(ev)
    case "session.resumed": resumedSession(ev)
    case "session.left": leftSession(ev)
    case "pong": if let re = ev["re"]?.stringValue, let id = Int(re) { pending.removeValue(forKey: id) }
    case "session.idle_warning", "session.timed_out": ctx.checker.note("a session idled (\(type))")
    default:
      if type.hasPrefix("call.") { callEvent(type: type, ev) }
    }
  }
}
