// Ringing (PROTOCOL.md §9): a bot places calls to members of its session and
// answers incoming ones according to the scenario's answer mix. Every
// terminal outcome goes to the call ledger, which checks "exactly one".
import RelayClientCore
import RelayProtocol
import RelayPrimitives

extension Bot {
  /// Places a call to `count` random other members; skipped when the relay
  /// has no ringing (it answered `unknown_type` before).
  func placeCall(_ b: Behaviour) -> Bool {
    guard ctx.ringingSupported else { return false }
    // §9: at most 10 call.initiate per user per 60 000 ms; stay under it.
    let now = ctx.nowMs
    recentCallMs.removeAll { $0 + 60_000 <= now }
    guard recentCallMs.count < 9 else { return false }
    recentCallMs.append(now)
    let callees = engine.randomPeers(of: self, count: b.callees)
    guard !callees.isEmpty else { return false }
    ctx.stats.callsStarted += 1
    send(.initiateCall(to: callees, callType: .audio, metadata: nil), kind: .callInitiate(callees: callees))
    return true
  }

  /// The caller cancels some of its calls shortly after placing them.
  func callPlaced(_ callId: String) {
    guard let b = ctx.scenario.behaviours.first(where: { $0.kind == .ring }) else { return }
    let cancelShare = b.mix["cancel"] ?? 0
    guard ctx.random.unit() < cancelShare else { return }
    engine.schedule(afterMs: 100 + ctx.random.below(400)) { [unowned self] in
      guard self.phase == .ready else { return }
      self.send(.cancelCall(callId), kind: .callCancel(callId))
    }
  }

  func callEvent(type: String, _ ev: JSONValue) {
    guard let callId = ev["callId"]?.stringValue else { return }
    let subject = ev["uid"]?.stringValue ?? ""
    let ledger = ctx.calls
    switch type {
    case "call.incoming":
      ledger.incoming(callId: callId, callee: uid)
      answer(callId)
    case "call.accepted":
      if subject == uid {
        ledger.calleeOutcome(callId: callId, callee: uid, "accepted", checker: ctx.checker)
        hangUpLater(callId)
      } else {
        ledger.callerOutcome(callId: callId, callee: subject, "accepted", checker: ctx.checker)
      }
    case "call.rejected": ledger.callerOutcome(callId: callId, callee: subject, "rejected", checker: ctx.checker)
    case "call.busy": ledger.callerOutcome(callId: callId, callee: subject, "busy", checker: ctx.checker)
    case "call.unanswered":
      ledger.callerOutcome(callId: callId, callee: subject, "unanswered", checker: ctx.checker)
    case "call.cancelled":
      let reason = ev["reason"]?.stringValue ?? ""
      ledger.calleeOutcome(
        callId: callId, callee: uid, reason == "unanswered" ? "unanswered" : "cancelled", checker: ctx.checker)
    default: break  // call.ringing, call.offline, call.ended: not terminal per callee
    }
  }

  /// Picks accept / reject / busy / ignore by the scenario's mix weights.
  private func answer(_ callId: String) {
    guard let b = ctx.scenario.behaviours.first(where: { $0.kind == .ring }) else { return }
    let choices = ["accept", "reject", "busy", "ignore"]
    let total = choices.reduce(0.0) { $0 + (b.mix[$1] ?? 0) }
    var pick = ctx.random.unit() * max(total, 1e-9)
    var choice = "ignore"
    for c in choices {
      pick -= b.mix[c] ?? 0
      if pick < 0 { choice = c; break }
    }
    let delay = 50 + ctx.random.below(300)  // a human-ish pause before answering
    engine.schedule(afterMs: delay) { [unowned self] in
      guard self.phase == .ready else { return }
      self.sendAnswer(choice, callId)
    }
  }

  private func sendAnswer(_ choice: String, _ callId: String) {
    switch choice {
    case "accept":
      send(.acceptCall(callId), kind: .callAccept(callId))
    case "reject", "busy":
      let reason = choice == "busy" ? "busy" : "declined"
      send(.rejectCall(callId, reason: reason), kind: .callReject(callId, reason: reason))
    default: break
    }
  }

  private func hangUpLater(_ callId: String) {
    let talkMs = ctx.scenario.behaviours.first(where: { $0.kind == .ring })?.talkMs ?? 1_000
    engine.schedule(afterMs: talkMs) { [unowned self] in
      guard self.phase == .ready else { return }
      self.send(.endCall(callId), kind: .callEnd(callId))
    }
  }
}
