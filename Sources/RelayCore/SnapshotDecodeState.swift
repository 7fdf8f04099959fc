// Restoring the liveness, call, counter and deadline state of a snapshot (the rest of
// SnapshotDecode.swift; layout in SnapshotEncode.swift).
import RelayProtocol

extension SnapshotReader {
  // MARK: Liveness (§5, §8)

  mutating func liveness() throws(BinaryError) -> LivenessState {
    var state = LivenessState()
    state.nextRecord = try counter()
    state.nextIdleGeneration = try counter()
    var previous: UInt64?
    for _ in 0..<(try r.count(minBytes: 21)) {
      let id = try r.u64()
      try ascending(&previous, id, "lost records")
      guard id < state.nextRecord else { throw r.error("lost record \(id) not yet numbered") }
      let record = LostRecord(uid: try r.string(), token: ResumeToken(try r.string()), sessions: try strings())
      state.records[id] = record
      if try r.bool() {
        guard state.recordByToken[record.token] == nil else { throw r.error("two records under one token") }
        state.recordByToken[record.token] = id
      }
    }
    var previousKey: ParticipantKey?
    for _ in 0..<(try r.count(minBytes: 16)) {
      let key = ParticipantKey(session: try r.string(), uid: try r.string())
      if let p = previousKey, !((p.session, p.uid) < (key.session, key.uid)) {
        throw r.error("lost owners out of order")
      }
      previousKey = key
      let id = try r.u64()
      guard state.records[id] != nil else { throw r.error("lost owner names unknown record \(id)") }
      state.lostOwner[key] = id
    }
    var previousSession: String?
    for _ in 0..<(try r.count(minBytes: 20)) {
      let session = try r.string()
      try ascending(&previousSession, session, "idle countdowns")
      let countdown = IdleCountdown(generation: try r.u64(), endsAtMonoMs: try time())
      guard countdown.generation < state.nextIdleGeneration, state.idleSession[countdown.generation] == nil else {
        throw r.error("idle generation \(countdown.generation) reused or not yet numbered")
      }
      state.idle[session] = countdown
      state.idleSession[countdown.generation] = session
    }
    return state
  }

  // MARK: Calls (§9)

  mutating func callBook() throws(BinaryError) -> CallBook {
    var book = CallBook()
    var previous: String?
    for _ in 0..<(try r.count(minBytes: 60)) {
      let c = try call()
      try ascending(&previous, c.id, "calls")
      book.calls[c.id] = c
    }
    previous = nil
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      try ascending(&previous, uid, "live call lists")
      let ids = try strings()
      try distinct(ids, "live call")
      var list: [Call] = []
      for id in ids {
        guard let c = book.calls[id] else { throw r.error("live list of \(uid) names unknown call \(id)") }
        list.append(c)
      }
      guard !list.isEmpty else { throw r.error("empty live call list") }
      book.live[uid] = list
    }
    previous = nil
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      try ascending(&previous, uid, "initiate windows")
      var times: [Int64] = []
      for _ in 0..<(try r.count(minBytes: 8)) { times.append(try time()) }
      book.initiateWindows[uid] = times
    }
    previous = nil
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      try ascending(&previous, uid, "ring windows")
      var times: [Int64] = []
      for _ in 0..<(try r.count(minBytes: 8)) { times.append(try time()) }
      book.ringWindows[uid] = times
    }
    book.stats = try callStats()
    let evicted = try counter()
    var finished: [(id: String, bytes: Int)] = []
    for _ in 0..<(try r.count(minBytes: 12)) {
      let id = try r.string()
      // One call's cost is a few KiB at most; below 2³² each, any number of them
      // (bounded by the input's length) sums without overflow.
      let bytes = try size()
      guard bytes < 1 << 32 else { throw r.error("finished call cost \(bytes) out of range") }
      finished.append((id, bytes))
    }
    book.finished = FinishedCalls(restoring: finished, evicted: evicted)
    return book
  }

  mutating func call() throws(BinaryError) -> Call {
    let id = try r.string()
    let sessionId = try r.string()
    let caller = CallCaller(
      uid: try r.string(), name: try r.string(),
      avatar: try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.string() })
    let callerConnection = ConnectionID(try r.u64())
    let to = try strings()
    try distinct(to, "callee")
    guard let callType = CallType(rawValue: try r.string()) else { throw r.error("unknown call type") }
    let metadata = try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.bytes() }
    let c = Call(
      id: id, sessionId: sessionId, caller: caller, callerConnection: callerConnection, to: to,
      callType: callType, metadata: metadata, createdAtWallMs: try time(), expiresAtWallMs: try time(),
      ringDeadlineMonoMs: try time())
    for _ in 0..<(try r.count(minBytes: 20)) { c.callees.append(try callee()) }
    // Ringing files one callee per `to` entry, in that order (Calls.swift `ring`).
    guard c.callees.map(\.uid) == to else { throw r.error("callees of \(id) are not its `to`") }
    c.acceptedAtMonoMs = try r.bool() ? try time() : nil
    c.endedBy = try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.string() }
    c.endReason = try r.bool() ? try known(EndReason(rawValue: try r.string()), "end reason") : nil
    c.endDurationMs = try r.bool() ? try time() : nil
    c.cancelledByCaller = try r.bool()
    c.finishedAtMonoMs = try r.bool() ? try time() : nil
    return c
  }

  mutating func callee() throws(BinaryError) -> Callee {
    let uid = try r.string()
    let state = try known(CalleeState(rawValue: try r.string()), "callee state")
    let c = Callee(uid: uid, state: state)
    for _ in 0..<(try r.count(minBytes: 8)) { c.devices.append(ConnectionID(try r.u64())) }
    for _ in 0..<(try r.count(minBytes: 8)) { c.done.append(ConnectionID(try r.u64())) }
    c.acceptedBy = try r.bool() ? ConnectionID(try r.u64()) : nil
    c.wasOffline = try r.bool()
    c.rejectReason = try r.bool() ? try known(RejectReason(rawValue: try r.string()), "reject reason") : nil
    c.cancelReason = try r.bool() ? try known(CancelReason(rawValue: try r.string()), "cancel reason") : nil
    c.pushed = try pushTargets(uid: uid)
    guard c.pushed.isEmpty || state == .ringing else { throw r.error("pushed devices of a callee no longer ringing") }
    return c
  }

  /// An enum value read by its wire name, refused when unknown.
  func known<T>(_ value: T?, _ what: String) throws(BinaryError) -> T {
    guard let value else { throw r.error("unknown \(what)") }
    return value
  }

  mutating func callStats() throws(BinaryError) -> CallStats {
    var s = CallStats()
    s.initiated = try counter()
    s.outcomes = try counts()
    s.webhooks = try counts()
    s.held = try size()
    s.finishedHeld = try size()
    s.finishedBytes = try size()
    s.finishedEvicted = try counter()
    return s
  }

  // MARK: Counters (§10)

  mutating func coreStats() throws(BinaryError) -> CoreStats {
    var s = CoreStats()
    s.connections = try size()
    s.sessions = try size()
    s.participants = try size()
    s.commandsByType = try counts()
    s.eventsByType = try counts()
    s.deliveries = try counter()
    s.errorsByCode = try counts()
    s.lost = try counter()
    s.restored = try counter()
    s.timedOut = try counter()
    s.replayBytes = try size()
    s.replayEvictions = try counter()
    return s
  }

  mutating func counts() throws(BinaryError) -> [String: UInt64] {
    var table: [String: UInt64] = [:]
    var previous: String?
    for _ in 0..<(try r.count(minBytes: 12)) {
      let key = try r.string()
      try ascending(&previous, key, "counter names")
      table[key] = try counter()
    }
    return table
  }

  // MARK: Deadlines

  /// In firing order, each numbered below the counter and still wanted by the
  /// restored state (the writer leaves moot ones out): a deadline for an unknown
  /// record, call or connection is refused.
  mutating func deadlines() throws(BinaryError) -> DeadlineQueue {
    let nextOrder = try counter()
    var entries: [Deadline] = []
    var orders: Set<UInt64> = []
    for _ in 0..<(try r.count(minBytes: 21)) {  // a ring or purge with an empty id
      let d = try deadline()
      guard d.order < nextOrder, orders.insert(d.order).inserted else {
        throw r.error("deadline order \(d.order) repeated or not yet numbered")
      }
      guard entries.last.map({ $0.fires(before: d) }) ?? true else { throw r.error("deadlines out of order") }
      guard core.isWanted(d.kind) else { throw r.error("deadline for nothing that wants it") }
      entries.append(d)
    }
    return DeadlineQueue(restoring: entries, nextOrder: nextOrder)
  }

  mutating func deadline() throws(BinaryError) -> Deadline {
    let at = try time()
    let order = try r.u64()
    let kind: DeadlineKind
    switch try r.u8() {
    case 0: kind = .hello(try connectionID())
    // Kind 1 was a §5 heartbeat check. Heartbeats are node-local (the shell's), and a
    // replicated core never armed one, so no stored snapshot holds it: refused.
    case 1: throw r.error("heartbeat deadline in a snapshot (heartbeats are node-local)")
    case 2: kind = .liveness(.grace(record: try r.u64()))
    case 3: kind = .liveness(.idleWarning(generation: try r.u64()))
    case 4: kind = .liveness(.idleEnd(generation: try r.u64()))
    case 5: kind = .call(.ring(callId: try r.string()))
    case 6: kind = .call(.purge(callId: try r.string()))
    default: throw r.error("unknown deadline kind")
    }
    return Deadline(atMonoMs: at, order: order, kind: kind)
  }
}
