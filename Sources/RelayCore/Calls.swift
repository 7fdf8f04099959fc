// Ringing commands (PROTOCOL.md §9; protocol/PROTOCOL.md §10): call.initiate,
// call.accept, call.reject, call.cancel, call.end. Every check throws its Refusal
// before anything changes, so a command racing a terminal state gets `conflict` and
// changes nothing; the reply goes out before the events it causes (§2).
import RelayProtocol

extension RelayCore {
  func handleCall(_ command: Command, _ request: Request) throws(Refusal) {
    switch command {
    case .callInitiate(let to, let callType, let metadata):
      try initiateCall(to: to, callType: callType, metadata: metadata, request)
    case .callAccept(let callId):
      let call = try partyCall(callId, uid: request.uid)
      let callee = try answeringCallee(call, uid: request.uid, verb: "accept")
      ok(request)
      accept(call, callee, on: request.c, at: request.at)
    case .callReject(let callId, let reason):
      let call = try partyCall(callId, uid: request.uid)
      let callee = try answeringCallee(call, uid: request.uid, verb: "reject")
      ok(request)
      reject(call, callee, reason: reason, on: request.c, at: request.at)
    case .callCancel(let callId):
      let call = try partyCall(callId, uid: request.uid)
      try checkCancel(call, uid: request.uid)
      ok(request)
      cancel(call, at: request.at)
    case .callEnd(let callId):
      let call = try partyCall(callId, uid: request.uid)
      try checkEnd(call, uid: request.uid)
      ok(request)
      end(call, by: request.uid, reason: .ended, at: request.at)
    default:
      preconditionFailure("not a call command: \(command.typeName)")
    }
  }

  // MARK: Checks (shared with the HTTP API)

  /// The call `callId` if `uid` is its caller or one of its callees. Unknown calls and
  /// calls of others are alike `not_found` (§9), so call ids cannot be probed.
  func partyCall(_ callId: String, uid: String) throws(Refusal) -> Call {
    guard let call = calls.calls[callId], call.caller.uid == uid || call.callee(uid) != nil else {
      throw Refusal(.notFound, "no call \(callId)")
    }
    return call
  }

  /// The sender as a callee still ringing. The caller answering its own call is
  /// `forbidden` (protocol/ §10: "a party using a command of the other side"); a callee
  /// whose outcome is decided gets `conflict`.
  func answeringCallee(_ call: Call, uid: String, verb: String) throws(Refusal) -> Callee {
    guard let callee = call.callee(uid) else {
      throw Refusal(.forbidden, "only a callee may \(verb) call \(call.id)")
    }
    guard callee.state == .ringing else {
      throw Refusal(.conflict, "call \(call.id) already \(callee.state.rawValue) for \(uid)")
    }
    return callee
  }

  /// `call.cancel` is the caller's, and only while some callee still rings.
  func checkCancel(_ call: Call, uid: String) throws(Refusal) {
    guard call.caller.uid == uid else { throw Refusal(.forbidden, "only the caller may cancel call \(call.id)") }
    guard call.isRinging else { throw Refusal(.conflict, "no callee is ringing") }
  }

  /// `call.end` is for the caller or an accepter of an accepted, not ended call; every
  /// other state is a conflict (already ended, never accepted, or not accepted by the
  /// sender).
  func checkEnd(_ call: Call, uid: String) throws(Refusal) {
    guard !call.isEnded else { throw Refusal(.conflict, "call already ended") }
    guard call.isAccepted else { throw Refusal(.conflict, "call \(call.id) was not accepted") }
    guard call.isInCall(uid) else { throw Refusal(.conflict, "\(uid) is not in call \(call.id)") }
  }

  // MARK: call.initiate

  func initiateCall(to: [String], callType: CallType, metadata: JSONObject?, _ request: Request) throws(Refusal) {
    var callees: [String] = []
    for uid in to where !callees.contains(uid) { callees.append(uid) }
    guard !callees.contains(request.uid) else {
      throw Refusal(.badRequest, "call.initiate: to must not contain the caller")
    }
    try checkRingBudget(callees, at: request.at)
    try acquireInitiate(request.uid, at: request.at)
    recordRinging(callees, at: request.at)
    let caller = CallCaller(uid: request.uid, name: request.identity.name, avatar: request.identity.avatar)
    let call = Call(
      id: newCallId(), sessionId: newCallSessionId(), caller: caller, callerConnection: request.c,
      to: callees, callType: callType, metadata: metadata.map { JSONValue.object($0).encoded() },
      at: request.at, ringTimeoutMs: config.ringTimeoutMs)
    calls.calls[call.id] = call
    calls.stats.initiated += 1
    // §3: the caller may join the call's session whatever its `sessions` claim says.
    grant(call.sessionId, to: request.uid)
    if let id = request.id {
      sendPersonal(request.c, type: "ok", re: id) { w in
        w.field("callId", call.id)
        w.field("sessionId", call.sessionId)
      }
    }
    ring(call, at: request.at)
  }

  /// §9: 10 `call.initiate` per user in any 60 000 ms window (sliding); a refused
  /// attempt is not recorded. Kept as plain instants so idle users can be pruned.
  func acquireInitiate(_ uid: String, at: Instant) throws(Refusal) {
    var times = calls.initiateWindows[uid] ?? []
    times.removeAll { at.monoMs - $0 >= CallBook.initiateWindowMs }
    guard times.count < CallBook.initiateLimit else {
      throw Refusal(.rateLimited, "at most \(CallBook.initiateLimit) call.initiate per \(CallBook.initiateWindowMs) ms")
    }
    times.append(at.monoMs)
    calls.initiateWindows[uid] = times
  }

  /// §10.1 `--ring-rate`: at most `ringRate` calls may ring one user in any
  /// `ringWindowMs` (sliding), whoever places them, so many callers together cannot
  /// flood a callee with `call.incoming` (each caller's own initiate rate does not
  /// bound that). A call to a user past it is refused `rate_limited` as a whole and
  /// nothing is recorded. Deterministic: instants come from the input.
  func checkRingBudget(_ callees: [String], at: Instant) throws(Refusal) {
    guard config.ringRate > 0 else { return }
    for uid in callees {
      guard let times = calls.ringWindows[uid] else { continue }
      let recent = times.reduce(0) { $0 + (at.monoMs - $1 < config.ringWindowMs ? 1 : 0) }
      guard recent < config.ringRate else {
        throw Refusal(.rateLimited, "at most \(config.ringRate) incoming calls per \(config.ringWindowMs) ms for \(uid)")
      }
    }
  }

  /// Counts one incoming call for each callee, dropping instants out of the window.
  func recordRinging(_ callees: [String], at: Instant) {
    guard config.ringRate > 0 else { return }
    for uid in callees {
      var times = calls.ringWindows[uid] ?? []
      times.removeAll { at.monoMs - $0 >= config.ringWindowMs }
      times.append(at.monoMs)
      calls.ringWindows[uid] = times
    }
  }

  func newCallId() -> String {
    var id = ids.token(byteCount: 16)
    while calls.calls[id] != nil { id = ids.token(byteCount: 16) }
    return id
  }

  /// A fresh, unguessable session id (16 random bytes, like `POST /v1/sessions`).
  func newCallSessionId() -> String {
    var id = ids.token(byteCount: 16)
    while sessions[id] != nil { id = ids.token(byteCount: 16) }
    return id
  }

  /// Rings every callee: busy ones are reported at once and not rung; offline ones
  /// ring through the webhook; every online connection gets one shared `call.incoming`.
  func ring(_ call: Call, at: Instant) {
    let callerTo = callerRecipients(call)
    var incomingTo: [ConnectionID] = []
    for uid in call.to {
      if isBusy(uid) {
        call.callees.append(Callee(uid: uid, state: .busy))
        calls.stats.outcomes["busy", default: 0] += 1
        send(calleeEvent("call.busy", call, uid: uid), to: callerTo, type: "call.busy")
        continue
      }
      let callee = Callee(uid: uid, state: .ringing)
      call.callees.append(callee)
      callee.devices = ringableConnections(of: uid)
      incomingTo.append(contentsOf: callee.devices)
      let pushed = pushRingStart(call, callee)
      if callee.devices.isEmpty {
        callee.wasOffline = true
        send(calleeEvent("call.offline", call, uid: uid, pushed: pushed), to: callerTo, type: "call.offline")
        webhookOffline(call, uid: uid, at: at)
      } else {
        send(calleeEvent("call.ringing", call, uid: uid, pushed: pushed), to: callerTo, type: "call.ringing")
      }
    }
    if !incomingTo.isEmpty { send(incomingPayload(call), to: incomingTo, type: "call.incoming") }
    calls.index(call)
    deadlines.schedule(at: call.ringDeadlineMonoMs, .call(.ring(callId: call.id)))
    finishIfOver(call, at: at)
  }

  /// §9 Busy: the user is the caller or an accepter of an accepted, not ended call.
  func isBusy(_ uid: String) -> Bool {
    calls.liveCalls(of: uid).contains { $0.isInCall(uid) }
  }

  // MARK: Outcomes (shared by commands, HTTP and timers)

  /// §9 accept: caller and accepter get `call.accepted`; the accepter's other
  /// connections `call.cancelled {answered_elsewhere}`. `on` is nil for an HTTP accept:
  /// then every connection of the callee is "elsewhere".
  func accept(_ call: Call, _ callee: Callee, on c: ConnectionID?, at: Instant) {
    callee.state = .accepted
    callee.acceptedBy = c
    if call.acceptedAtMonoMs == nil { call.acceptedAtMonoMs = at.monoMs }
    calls.stats.outcomes["accepted", default: 0] += 1
    // §3: an accepter may join the call's session whatever its `sessions` claim says.
    grant(call.sessionId, to: callee.uid)
    let accepted = makeMessage(type: "call.accepted") { w in
      w.field("callId", call.id)
      w.field("uid", callee.uid)
      w.field("sessionId", call.sessionId)
    }
    send(accepted, to: (c.map { [$0] } ?? []) + callerRecipients(call), type: "call.accepted")
    stopOtherDevices(call, callee, keeping: c, reason: .answeredElsewhere)
    webhook("call.accepted", call, at: at) { w in w.field("uid", callee.uid) }
  }

  /// §9 reject: the caller gets `call.rejected`; the rejecter's other connections
  /// `call.cancelled {rejected_elsewhere}`.
  func reject(_ call: Call, _ callee: Callee, reason: RejectReason, on c: ConnectionID?, at: Instant) {
    callee.state = .rejected
    callee.rejectReason = reason
    calls.stats.outcomes["rejected", default: 0] += 1
    let rejected = makeMessage(type: "call.rejected") { w in
      w.field("callId", call.id)
      w.field("uid", callee.uid)
      w.field("reason", reason.rawValue)
    }
    send(rejected, to: callerRecipients(call), type: "call.rejected")
    stopOtherDevices(call, callee, keeping: c, reason: .rejectedElsewhere)
    webhook("call.rejected", call, at: at) { w in
      w.field("uid", callee.uid)
      w.field("reason", reason.rawValue)
    }
    finishIfOver(call, at: at)
  }

  /// The answering callee's devices other than `keeping` get their terminal
  /// `call.cancelled` and hear nothing more about the call.
  func stopOtherDevices(_ call: Call, _ callee: Callee, keeping: ConnectionID?, reason: CancelReason) {
    let others = ringableConnections(of: callee.uid).filter { $0 != keeping && !callee.done.contains($0) }
    send(cancelledEvent(call, reason), to: others, type: "call.cancelled")
    pushRingEnded(call, callee, reason: reason, except: keeping.flatMap { connections[$0]?.device })
    callee.done.append(contentsOf: others)
    callee.devices = keeping.map { [$0] } ?? []
  }

  /// §9 cancel: every connection of each ringing callee gets `call.cancelled
  /// {cancelled}`.
  func cancel(_ call: Call, at: Instant) {
    call.cancelledByCaller = true
    stopRinging(call, as: .cancelled, reason: .cancelled, at: at)
    finishIfOver(call, at: at)
  }

  /// Ends the ring of every callee still ringing: their devices get one shared
  /// `call.cancelled {reason}`, and callees that were offline get the webhook (§11) so
  /// the app server can withdraw the push. Returns the callees it stopped.
  @discardableResult
  func stopRinging(_ call: Call, as state: CalleeState, reason: CancelReason, at: Instant) -> [Callee] {
    let ringing = call.callees.filter { $0.state == .ringing }
    guard !ringing.isEmpty else { return [] }
    var recipients: [ConnectionID] = []
    for callee in ringing {
      callee.state = state
      callee.cancelReason = reason
      calls.stats.outcomes[state.rawValue, default: 0] += 1
      let devices = callee.devices.filter(isReady)
      recipients.append(contentsOf: devices)
      callee.done.append(contentsOf: devices)
      callee.devices = []
    }
    send(cancelledEvent(call, reason), to: recipients, type: "call.cancelled")
    for callee in ringing { pushRingEnded(call, callee, reason: reason) }
    for callee in ringing where callee.wasOffline {
      webhook("call.cancelled", call, at: at) { w in
        w.field("uid", callee.uid)
        w.field("reason", reason.rawValue)
      }
    }
    return ringing
  }

  /// §9 end (and §5 timed out): every party gets `call.ended {by, reason, duration}`;
  /// callees still ringing stop (`caller_timed_out` when the caller timed out).
  func end(_ call: Call, by uid: String, reason: EndReason, at: Instant) {
    let duration = at.monoMs - (call.acceptedAtMonoMs ?? at.monoMs)
    call.endedBy = uid
    call.endReason = reason
    call.endDurationMs = duration
    var recipients = callerRecipients(call)
    for callee in call.callees where callee.state == .accepted {
      callee.state = .ended
      calls.stats.outcomes["ended", default: 0] += 1
      recipients.append(contentsOf: partyConnections(callee))
    }
    let ended = makeMessage(type: "call.ended") { w in
      w.field("callId", call.id)
      w.field("by", uid)
      w.field("reason", reason.rawValue)
      w.field("duration", duration)
    }
    send(ended, to: recipients, type: "call.ended")
    let callerTimedOut = reason == .timedOut && uid == call.caller.uid
    stopRinging(call, as: .cancelled, reason: callerTimedOut ? .callerTimedOut : .cancelled, at: at)
    webhook("call.ended", call, at: at) { w in
      w.field("by", uid)
      w.field("reason", reason.rawValue)
      w.field("duration", duration)
    }
    finishIfOver(call, at: at)
  }

  // MARK: Recipients

  func isReady(_ c: ConnectionID) -> Bool { connections[c]?.phase == .ready }

  /// Connections that ring for `uid`: those that said hello and are not closing. A
  /// lost connection is dropped (and so closing) the moment it is declared lost, so a
  /// lost user counts as offline here (§5) without a separate check.
  func ringableConnections(of uid: String) -> [ConnectionID] {
    userConnections.elements(withKey: uid).lazy.map(\.id).filter(isReady)
  }

  /// The caller's events go to the connection that placed the call; if it is gone
  /// (a resume moved the user to a new connection), to every connection of the caller.
  func callerRecipients(_ call: Call) -> [ConnectionID] {
    isReady(call.callerConnection) ? [call.callerConnection] : ringableConnections(of: call.caller.uid)
  }

  /// An accepted callee's connections that are still in the call: every connection
  /// except those already told the call went elsewhere (so a device woken by a push
  /// after an HTTP accept still hears `call.ended`).
  func partyConnections(_ callee: Callee) -> [ConnectionID] {
    ringableConnections(of: callee.uid).filter { !callee.done.contains($0) }
  }
}
