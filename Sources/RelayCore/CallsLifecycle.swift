// Calls and the passage of time and connections: the ring timeout (§9), delivery of
// calls still ringing after `welcome` (§4.2), the §5 rules for timed-out users, the
// end of a user's last connection, and forgetting finished calls.
import RelayProtocol

extension RelayCore {
  // MARK: Deadlines

  func isCallDeadlineWanted(_ deadline: CallDeadline) -> Bool {
    switch deadline {
    case .ring(let callId): return calls.calls[callId]?.isRinging == true
    case .purge(let callId): return calls.calls[callId] != nil
    }
  }

  func fireCallDeadline(_ deadline: CallDeadline, at: Instant) {
    switch deadline {
    case .ring(let callId):
      guard let call = calls.calls[callId] else { return }
      ringTimedOut(call, at: at)
    case .purge(let callId):
      guard let call = calls.calls[callId] else { return }
      purge(call, at: at)
    }
  }

  /// §9 `--ring-timeout`: each callee still ringing (offline ones included) gets
  /// `call.cancelled {unanswered}`; the caller gets `call.unanswered` for each.
  func ringTimedOut(_ call: Call, at: Instant) {
    let stopped = stopRinging(call, as: .unanswered, reason: .unanswered, at: at)
    let callerTo = callerRecipients(call)
    for callee in stopped {
      send(calleeEvent("call.unanswered", call, uid: callee.uid), to: callerTo, type: "call.unanswered")
      webhook("call.unanswered", call, at: at) { w in w.field("uid", callee.uid) }
    }
    finishIfOver(call, at: at)
  }

  /// A call that can change no more leaves the per-user index (no longer busy, no
  /// longer delivered on hello) and is forgotten after `CallBook.retentionMs`.
  func finishIfOver(_ call: Call, at: Instant) {
    guard call.isOver, call.finishedAtMonoMs == nil else { return }
    call.finishedAtMonoMs = at.monoMs
    calls.unindex(call)
    call.incoming = nil  // nobody rings any more
    deadlines.schedule(at: at.monoMs + CallBook.retentionMs, .call(.purge(callId: call.id)))
    calls.finished.add(call)
    boundFinishedCalls(at: at)
  }

  /// Forgets a finished call, the session grants it gave (§3) and the caller's expired
  /// rate-limit instants.
  func purge(_ call: Call, at: Instant) {
    guard calls.calls.removeValue(forKey: call.id) != nil else { return }
    // Retention deadlines fire in finish order: a call purged by its deadline is the
    // oldest finished one (an early purge has already taken its own entry off).
    while let oldest = calls.finished.oldest, calls.calls[oldest] == nil { _ = calls.finished.popOldest() }
    let granted = [call.caller.uid] + call.callees.filter { $0.state == .ended || $0.state == .accepted }.map(\.uid)
    for uid in granted {
      grantedSessions[uid]?.remove(call.sessionId)
      if grantedSessions[uid]?.isEmpty == true { grantedSessions[uid] = nil }
    }
    if let times = calls.initiateWindows[call.caller.uid],
      times.allSatisfy({ at.monoMs - $0 >= CallBook.initiateWindowMs })
    {
      calls.initiateWindows[call.caller.uid] = nil
    }
    for uid in call.to {
      if let times = calls.ringWindows[uid], times.allSatisfy({ at.monoMs - $0 >= config.ringWindowMs }) {
        calls.ringWindows[uid] = nil
      }
    }
  }

  // MARK: Connections

  /// §4.2: right after `welcome`, a `call.incoming` for every call still ringing this
  /// user; the new connection then rings with the others (and gets the same
  /// `answered_elsewhere` / `rejected_elsewhere` / cancel as they do).
  func deliverRingingCalls(to connection: Connection, at: Instant) {
    guard let uid = connection.uid else { return }
    for call in calls.liveCalls(of: uid) {
      guard let callee = call.callee(uid), callee.state == .ringing else { continue }
      callee.devices.append(connection.id)
      send(incomingPayload(call), to: [connection.id], type: "call.incoming")
    }
  }

  /// Called by `closed` once the connection is forgotten. When a user's last connection
  /// closes cleanly (it left on purpose, so it is never "lost", §5), its accepted calls
  /// end: otherwise nothing would ever end them and both sides would stay busy. Calls
  /// still ringing are left to the ring timeout, which bounds them anyway.
  func callsConnectionClosed(_ connection: Connection, clean: Bool, at: Instant) {
    guard clean, let uid = connection.uid, ringableConnections(of: uid).isEmpty else { return }
    for call in calls.liveCalls(of: uid) where call.isInCall(uid) {
      end(call, by: uid, reason: .ended, at: at)
    }
  }

  /// §5 grace over for `uid`: its accepted calls end (`call.ended {timed_out}`), and
  /// the callees of calls it still rings as caller get `call.cancelled
  /// {caller_timed_out}`. A callee that is only ringing keeps ringing (it counts as
  /// offline) until it answers elsewhere or the ring times out.
  func endCallsOfTimedOutUser(uid: String, at: Instant) {
    for call in calls.liveCalls(of: uid) {
      if call.isInCall(uid) {
        end(call, by: uid, reason: .timedOut, at: at)
      } else if call.caller.uid == uid {
        stopRinging(call, as: .cancelled, reason: .callerTimedOut, at: at)
        finishIfOver(call, at: at)
      }
    }
  }
}
