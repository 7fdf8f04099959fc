// The listener protocols app developers know from calling SDKs. Every method has a
// default no-op, so an app implements only what it shows. Callbacks arrive on the
// client's callback queue, never on the I/O thread.

public import RelayClientCore
public import RelayProtocol

/// The local user's sessions and the connection.
public protocol SessionStatusListener: AnyObject {
  /// `session.joined`: the snapshot is in `RelayClient.state` already. Also after a
  /// reconnect whose replay was impossible (§8): the snapshot then replaced the old
  /// state and the differences were reported as participant events first.
  func onSessionJoined(_ session: SessionState)
  /// `session.left`; `reason` is `left`, `replaced` (this user joined from another
  /// connection) or `removed` (by a host or the admin API).
  func onSessionLeft(sessionID: String, reason: String)
  /// The connection dropped; the client is reconnecting.
  func onConnectionLost()
  /// Reconnected and resumed: the event stream continues with no gap and no duplicate.
  func onConnectionRestored()
  /// The connection ended for good: the relay closed with 1000 or 4500–4999 (e.g.
  /// 4501 bad token, 4509 replaced), or the app called `disconnect()` (1000).
  func onConnectionClosed(code: UInt16, reason: String)
  /// `session.timed_out`: removed after being alone for the idle timeout.
  func onSessionTimedOut(sessionID: String)
  /// `session.idle_warning`: alone in the session; removed at `timeoutAt` (Unix ms).
  func onSessionIdleWarning(sessionID: String, timeoutAt: Int64)
}

extension SessionStatusListener {
  /// Default: ignored.
  public func onSessionJoined(_ session: SessionState) {}
  /// Default: ignored.
  public func onSessionLeft(sessionID: String, reason: String) {}
  /// Default: ignored.
  public func onConnectionLost() {}
  /// Default: ignored.
  public func onConnectionRestored() {}
  /// Default: ignored.
  public func onConnectionClosed(code: UInt16, reason: String) {}
  /// Default: ignored.
  public func onSessionTimedOut(sessionID: String) {}
  /// Default: ignored.
  public func onSessionIdleWarning(sessionID: String, timeoutAt: Int64) {}
}

/// An app message (`message`, §7a).
public struct RelayMessage: Sendable, Equatable {
  /// The sender's uid.
  public var from: String
  /// The JSON value the sender sent.
  public var data: JSONValue
  /// The session event number.
  public var seq: Int64
  /// Server wall clock, Unix ms.
  public var ts: Int64
}

/// Other members of the local user's sessions (session events, §5–§7a).
public protocol ParticipantEventListener: AnyObject {
  /// `participant.joined`.
  func onParticipantJoined(_ participant: Participant, sessionID: String)
  /// `participant.left`; `reason` is `left`, `removed` or `idle`.
  func onParticipantLeft(uid: String, reason: String, sessionID: String)
  /// `hand.raised`: the hand is now last in `state.sessions[id].hands`.
  func onParticipantHandRaised(_ hand: RaisedHand, sessionID: String)
  /// `hand.lowered` (`reason`: `self`, `host`, `left`, `removed`, `timed_out`), and one
  /// call per hand for `hands.cleared` (reason `cleared`).
  func onParticipantHandLowered(uid: String, by: String, reason: String, sessionID: String)
  /// `participant.lost`: its connection dropped; kept for the grace period.
  func onParticipantConnectionLost(uid: String, sessionID: String)
  /// `participant.restored`: back within grace.
  func onParticipantConnectionRestored(uid: String, sessionID: String)
  /// `participant.timed_out`: grace over; removed.
  func onParticipantTimedOut(uid: String, sessionID: String)
  /// `message`, the sender's own included.
  func onMessageReceived(_ message: RelayMessage, sessionID: String)
}

extension ParticipantEventListener {
  /// Default: ignored.
  public func onParticipantJoined(_ participant: Participant, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantLeft(uid: String, reason: String, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantHandRaised(_ hand: RaisedHand, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantHandLowered(uid: String, by: String, reason: String, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantConnectionLost(uid: String, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantConnectionRestored(uid: String, sessionID: String) {}
  /// Default: ignored.
  public func onParticipantTimedOut(uid: String, sessionID: String) {}
  /// Default: ignored.
  public func onMessageReceived(_ message: RelayMessage, sessionID: String) {}
}

/// Ringing (§9).
public protocol CallListener: AnyObject {
  /// `call.incoming`, including a call still ringing when this client connects.
  func onIncomingCallReceived(_ call: Call)
  /// A callee accepted this user's call; join `call.sessionID`.
  func onOutgoingCallAccepted(_ call: Call, by uid: String)
  /// A callee rejected (`reason`: `declined` or `busy`).
  func onOutgoingCallRejected(_ call: Call, by uid: String, reason: String)
  /// An incoming call stopped ringing here: cancelled by the caller, answered or
  /// rejected on another device of this user, unanswered, or the caller timed out.
  func onIncomingCallCancelled(_ call: Call, reason: CallCancelReason)
  /// A callee did not answer within the ring timeout.
  func onOutgoingCallUnanswered(_ call: Call, uid: String)
  /// A callee is in another accepted call and was not rung.
  func onCallBusy(_ call: Call, uid: String)
  /// The call ended (`reason`: `ended` or `timed_out`), after `durationMs`.
  func onCallEnded(_ call: Call, by uid: String, reason: String, durationMs: Int64)
}

extension CallListener {
  /// Default: ignored.
  public func onIncomingCallReceived(_ call: Call) {}
  /// Default: ignored.
  public func onOutgoingCallAccepted(_ call: Call, by uid: String) {}
  /// Default: ignored.
  public func onOutgoingCallRejected(_ call: Call, by uid: String, reason: String) {}
  /// Default: ignored.
  public func onIncomingCallCancelled(_ call: Call, reason: CallCancelReason) {}
  /// Default: ignored.
  public func onOutgoingCallUnanswered(_ call: Call, uid: String) {}
  /// Default: ignored.
  public func onCallBusy(_ call: Call, uid: String) {}
  /// Default: ignored.
  public func onCallEnded(_ call: Call, by uid: String, reason: String, durationMs: Int64) {}
}

/// Calls the right listener method for one event. Runs on the callback queue.
func dispatch(
  _ event: ClientEvent, sessions: [any SessionStatusListener],
  participants: [any ParticipantEventListener], calls: [any CallListener]
) {
  switch event {
  case .sessionJoined(let s, _): sessions.forEach { $0.onSessionJoined(s) }
  case .sessionLeft(let s, let reason): sessions.forEach { $0.onSessionLeft(sessionID: s, reason: reason) }
  case .connectionLost: sessions.forEach { $0.onConnectionLost() }
  case .connectionRestored: sessions.forEach { $0.onConnectionRestored() }
  case .connectionClosed(let code, let reason):
    sessions.forEach { $0.onConnectionClosed(code: code, reason: reason) }
  case .sessionTimedOut(let s): sessions.forEach { $0.onSessionTimedOut(sessionID: s) }
  case .sessionIdleWarning(let s, let at):
    sessions.forEach { $0.onSessionIdleWarning(sessionID: s, timeoutAt: at) }
  case .participantJoined(let s, let p): participants.forEach { $0.onParticipantJoined(p, sessionID: s) }
  case .participantLeft(let s, let uid, let reason):
    participants.forEach { $0.onParticipantLeft(uid: uid, reason: reason, sessionID: s) }
  case .handRaised(let s, let hand): participants.forEach { $0.onParticipantHandRaised(hand, sessionID: s) }
  case .handLowered(let s, let uid, let by, let reason):
    participants.forEach { $0.onParticipantHandLowered(uid: uid, by: by, reason: reason, sessionID: s) }
  case .participantLost(let s, let uid):
    participants.forEach { $0.onParticipantConnectionLost(uid: uid, sessionID: s) }
  case .participantRestored(let s, let uid):
    participants.forEach { $0.onParticipantConnectionRestored(uid: uid, sessionID: s) }
  case .participantTimedOut(let s, let uid): participants.forEach { $0.onParticipantTimedOut(uid: uid, sessionID: s) }
  case .messageReceived(let s, let from, let data, let seq, let ts):
    let message = RelayMessage(from: from, data: data, seq: seq, ts: ts)
    participants.forEach { $0.onMessageReceived(message, sessionID: s) }
  case .incomingCall(let call): calls.forEach { $0.onIncomingCallReceived(call) }
  case .outgoingCallAccepted(let call, let by): calls.forEach { $0.onOutgoingCallAccepted(call, by: by) }
  case .outgoingCallRejected(let call, let by, let reason):
    calls.forEach { $0.onOutgoingCallRejected(call, by: by, reason: reason) }
  case .incomingCallCancelled(let call, let reason): calls.forEach { $0.onIncomingCallCancelled(call, reason: reason) }
  case .outgoingCallUnanswered(let call, let uid): calls.forEach { $0.onOutgoingCallUnanswered(call, uid: uid) }
  case .callBusy(let call, let uid): calls.forEach { $0.onCallBusy(call, uid: uid) }
  case .callEnded(let call, let by, let reason, let duration):
    calls.forEach { $0.onCallEnded(call, by: by, reason: reason, durationMs: duration) }
  }
}
