// The call state machine from one party's side (§9): every `call.*` event updates
// the call and, where the app must act, becomes one listener event.

import RelayProtocol

extension ClientMachine {
  mutating func callEvent(_ type: String, _ m: JSONObject) {
    if type == "call.incoming" {
      guard let call = Decoding.incomingCall(m) else { return }
      // After a resume the relay re-announces calls still ringing (§4 step 2);
      // the app heard of this one already.
      if let known = snapshot.calls[call.id], known.status == .ringing { return }
      snapshot.calls[call.id] = call
      out.append(.event(.incomingCall(call)))
      return
    }
    guard let id = m.str("callId"), var call = snapshot.calls[id] else { return }
    let uid = m.str("uid") ?? ""
    var event: ClientEvent?
    switch type {
    case "call.ringing", "call.offline":
      call.callees[uid] = type == "call.ringing" ? "ringing" : "offline"
      if let pushed = m.int("pushed") { call.pushed[uid] = Int(pushed) }
    case "call.accepted":
      call.status = .accepted
      call.callees[uid] = "accepted"
      if let session = m.str("sessionId") { call.sessionID = session }
      if call.direction == .outgoing { event = .outgoingCallAccepted(call, by: uid) }
    case "call.rejected":
      call.callees[uid] = "rejected"
      call.status = Self.outgoingStatus(call)
      event = .outgoingCallRejected(call, by: uid, reason: m.str("reason") ?? "declined")
    case "call.busy":
      call.callees[uid] = "busy"
      call.status = Self.outgoingStatus(call)
      event = .callBusy(call, uid: uid)
    case "call.unanswered":
      call.callees[uid] = "unanswered"
      call.status = Self.outgoingStatus(call)
      event = .outgoingCallUnanswered(call, uid: uid)
    case "call.cancelled":
      guard call.status == .ringing else { return }
      call.status = .cancelled
      event = .incomingCallCancelled(call, reason: CallCancelReason(rawValue: m.str("reason") ?? "") ?? .cancelled)
    case "call.ended":
      call.status = .ended
      event = .callEnded(
        call, by: m.str("by") ?? "", reason: m.str("reason") ?? "ended", durationMs: m.int("duration") ?? 0)
    default:
      return
    }
    snapshot.calls[id] = call
    if let event { out.append(.event(event)) }
  }

  /// An outgoing call's status from its callees' outcomes (§9: each callee answers
  /// for itself): accepted if anyone accepted, ringing while anyone still may,
  /// else the most telling terminal outcome.
  static func outgoingStatus(_ call: Call) -> CallStatus {
    let outcomes = call.to.map { call.callees[$0] ?? "ringing" }
    if outcomes.contains("accepted") { return .accepted }
    if outcomes.contains("ringing") || outcomes.contains("offline") { return .ringing }
    if outcomes.contains("rejected") { return .rejected }
    if outcomes.contains("unanswered") { return .unanswered }
    return .busy
  }
}
