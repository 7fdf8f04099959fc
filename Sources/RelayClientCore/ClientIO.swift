// The inputs and outputs of `ClientMachine`: commands the app issues, events it is
// told about, and effects the transport shell carries out.

public import RelayProtocol

/// A command the app asks for (§17, "Commands").
public enum ClientCommand: Sendable, Equatable {
  /// `session.join`.
  case joinSession(String)
  /// `session.leave`.
  case leaveSession(String)
  /// `hand.raise`.
  case raiseHand(session: String)
  /// `hand.lower`; `uid` nil lowers the user's own hand.
  case lowerHand(session: String, uid: String?)
  /// `hand.lower_all` (host).
  case lowerAllHands(session: String)
  /// `message.send`.
  case sendMessage(session: String, data: JSONValue)
  /// `participant.remove` (host).
  case removeParticipant(session: String, uid: String)
  /// `call.initiate`.
  case initiateCall(to: [String], callType: CallType, metadata: JSONObject?)
  /// `call.accept`.
  case acceptCall(String)
  /// `call.reject`; reason `declined` (default) or `busy`.
  case rejectCall(String, reason: String?)
  /// `call.cancel`.
  case cancelCall(String)
  /// `call.end`.
  case endCall(String)

  // Push (§9a).
  /// `push.register`; `device` nil means the connection's `hello.device`, and
  /// `environment` is sent for APNs kinds only.
  case registerPushToken(token: String, kind: PushKind, environment: PushEnvironment, device: String?)
  /// `push.unregister`.
  case unregisterPushToken(String)
}

/// Something the app's listeners hear about, in the order the relay sent it.
public enum ClientEvent: Sendable, Equatable {
  // Session status (personal events, §6, §5).
  /// `session.joined` (also after a resume that could not replay: `recovered` false).
  case sessionJoined(SessionState, recovered: Bool?)
  /// `session.left`: `left`, `replaced` or `removed`.
  case sessionLeft(session: String, reason: String)
  /// The connection dropped; the client reconnects.
  case connectionLost
  /// Reconnected; every joined session resumed (or was re-read, §8).
  case connectionRestored
  /// The relay closed the connection for good (1000, 4500–4999) or the app called
  /// `disconnect()` (code 1000).
  case connectionClosed(code: UInt16, reason: String)
  /// `session.timed_out`.
  case sessionTimedOut(session: String)
  /// `session.idle_warning`.
  case sessionIdleWarning(session: String, timeoutAt: Int64)

  // Participants (session events, §5–§7a).
  /// `participant.joined`.
  case participantJoined(session: String, Participant)
  /// `participant.left`: `left`, `removed` or `idle`.
  case participantLeft(session: String, uid: String, reason: String)
  /// `hand.raised`.
  case handRaised(session: String, RaisedHand)
  /// `hand.lowered` (`hands.cleared` is reported as one lowering per hand that was
  /// up, reason `cleared`, so a UI tracking single hands needs one callback).
  case handLowered(session: String, uid: String, by: String, reason: String)
  /// `participant.lost`.
  case participantLost(session: String, uid: String)
  /// `participant.restored`.
  case participantRestored(session: String, uid: String)
  /// `participant.timed_out`.
  case participantTimedOut(session: String, uid: String)
  /// `message`.
  case messageReceived(session: String, from: String, data: JSONValue, seq: Int64, ts: Int64)

  // Calls (personal events, §9).
  /// `call.incoming` (also right after `welcome` for a call still ringing).
  case incomingCall(Call)
  /// `call.accepted` on the caller's side.
  case outgoingCallAccepted(Call, by: String)
  /// `call.rejected` on the caller's side.
  case outgoingCallRejected(Call, by: String, reason: String)
  /// `call.cancelled` on a callee's side.
  case incomingCallCancelled(Call, reason: CallCancelReason)
  /// `call.unanswered` on the caller's side.
  case outgoingCallUnanswered(Call, uid: String)
  /// `call.busy` on the caller's side.
  case callBusy(Call, uid: String)
  /// `call.ended` on any party's side.
  case callEnded(Call, by: String, reason: String, durationMs: Int64)
}

/// A reply to a command that had a request id: the `ok` object (§2), or the error.
public typealias CommandReply = Result<JSONObject, RelayError>

/// What the transport shell must do, in order.
public enum ClientEffect: Sendable, Equatable {
  /// Open a new WebSocket to the relay (`/v1/ws`, subprotocol `relay.v1`); report
  /// `transportOpened` or `transportClosed`.
  case openTransport
  /// Send one text message.
  case send([UInt8])
  /// Close the WebSocket with this code (a close frame, then TCP); nil drops the
  /// socket without a close frame, so the relay treats the user as lost and keeps
  /// its state for the resume (§5: a close frame is a clean leave). The shell never
  /// reports back on a transport it was told to close.
  case closeTransport(code: UInt16?)
  /// Tell the app's listeners.
  case event(ClientEvent)
  /// Complete the command submitted with this request id.
  case reply(requestID: UInt64, CommandReply)
}
