// The commands, each in two forms: fire-and-forget (for UI actions; the events are
// the source of truth, §18 item 3) and async, returning once the relay said `ok`
// (with a typed value where there is one: the joined `SessionState`, the `Call`) or
// throwing its error code.

public import RelayClientCore
public import RelayProtocol
import Dispatch

extension RelayClient {
  // MARK: Sessions

  /// Joins a session (`session.join`); `onSessionJoined` follows.
  public func joinSession(sessionID: String) { post(.command(.joinSession(sessionID), requestID: nil)) }

  /// Joins a session and returns its state (participants, hand queue) as the
  /// relay's snapshot gave it; `state.sessions[sessionID]` holds the same by then.
  @discardableResult
  public func joinSession(sessionID: String) async throws(RelayError) -> SessionState {
    let (reply, snapshot) = await requestWithState(.joinSession(sessionID))
    _ = try reply.get()
    // The reply comes once `session.joined` was applied (ClientMachine); a session
    // already gone again (removed at once) is reported as such.
    guard let session = snapshot.sessions[sessionID] else {
      throw .server(code: .notInSession, message: "session \(sessionID) left right after the join")
    }
    return session
  }

  /// Leaves a session (`session.leave`); `onSessionLeft` follows.
  public func leaveSession(sessionID: String) { post(.command(.leaveSession(sessionID), requestID: nil)) }

  /// Leaves a session and returns once it is gone from `state`.
  public func leaveSession(sessionID: String) async throws(RelayError) {
    _ = try await request(.leaveSession(sessionID)).get()
  }

  /// Sends an app message (`message.send`, `data` ≤ 8 192 bytes encoded) to every
  /// member, this user included.
  public func sendMessage(_ data: JSONValue, sessionID: String) {
    post(.command(.sendMessage(session: sessionID, data: data), requestID: nil))
  }

  /// Sends an app message and returns once the relay accepted it.
  public func sendMessage(_ data: JSONValue, sessionID: String) async throws(RelayError) {
    _ = try await request(.sendMessage(session: sessionID, data: data)).get()
  }

  /// Removes a participant (host only, `participant.remove`).
  public func removeParticipant(uid: String, sessionID: String) {
    post(.command(.removeParticipant(session: sessionID, uid: uid), requestID: nil))
  }

  /// Removes a participant (host only) and returns once the relay accepted it.
  public func removeParticipant(uid: String, sessionID: String) async throws(RelayError) {
    _ = try await request(.removeParticipant(session: sessionID, uid: uid)).get()
  }

  // MARK: Raise hand

  /// Raises this user's hand (`hand.raise`): it joins the back of the queue.
  public func raiseHand(sessionID: String) { post(.command(.raiseHand(session: sessionID), requestID: nil)) }

  /// Raises this user's hand and returns once the relay accepted it.
  public func raiseHand(sessionID: String) async throws(RelayError) {
    _ = try await request(.raiseHand(session: sessionID)).get()
  }

  /// Lowers this user's hand (`hand.lower`).
  public func lowerHand(sessionID: String) {
    post(.command(.lowerHand(session: sessionID, uid: nil), requestID: nil))
  }

  /// Lowers this user's hand and returns once the relay accepted it.
  public func lowerHand(sessionID: String) async throws(RelayError) {
    _ = try await request(.lowerHand(session: sessionID, uid: nil)).get()
  }

  /// Lowers another participant's hand (host only).
  public func lowerHand(uid: String, sessionID: String) {
    post(.command(.lowerHand(session: sessionID, uid: uid), requestID: nil))
  }

  /// Lowers another participant's hand (host only) and returns once the relay accepted it.
  public func lowerHand(uid: String, sessionID: String) async throws(RelayError) {
    _ = try await request(.lowerHand(session: sessionID, uid: uid)).get()
  }

  /// Lowers every hand (host only, `hand.lower_all`).
  public func lowerAllHands(sessionID: String) {
    post(.command(.lowerAllHands(session: sessionID), requestID: nil))
  }

  /// Lowers every hand (host only) and returns once the relay accepted it.
  public func lowerAllHands(sessionID: String) async throws(RelayError) {
    _ = try await request(.lowerAllHands(session: sessionID)).get()
  }

  // MARK: Calls

  /// Rings `to` (1–32 uids, `call.initiate`) and returns the call, already in
  /// `state.calls`; the outcome arrives through the call listener.
  public func initiateCall(to: [String], callType: CallType, metadata: JSONObject? = nil)
    async throws(RelayError) -> Call
  {
    let (reply, snapshot) = await requestWithState(.initiateCall(to: to, callType: callType, metadata: metadata))
    let ok = try reply.get()
    let id = ok["callId"]?.stringValue ?? ""
    return snapshot.calls[id]
      ?? Call(
        id: id, sessionID: ok["sessionId"]?.stringValue ?? "", direction: .outgoing,
        from: snapshot.user ?? CallUser(uid: "", name: ""), to: to, callType: callType, metadata: metadata)
  }

  /// `initiateCall` for code without async: `completion` runs on the callback queue.
  public func initiateCall(
    to: [String], callType: CallType, metadata: JSONObject? = nil,
    completion: @escaping @Sendable (Result<Call, RelayError>) -> Void
  ) {
    Task {
      do throws(RelayError) {
        let call = try await initiateCall(to: to, callType: callType, metadata: metadata)
        callbackQueue.async { completion(.success(call)) }
      } catch {
        callbackQueue.async { completion(.failure(error)) }
      }
    }
  }

  /// Accepts an incoming call (`call.accept`); this user's other devices get
  /// `onIncomingCallCancelled(.answeredElsewhere)`.
  public func acceptCall(callID: String) { post(.command(.acceptCall(callID), requestID: nil)) }

  /// Accepts an incoming call and returns once the relay accepted it.
  public func acceptCall(callID: String) async throws(RelayError) {
    _ = try await request(.acceptCall(callID)).get()
  }

  /// Rejects an incoming call; `reason` is `declined` (default) or `busy`.
  public func rejectCall(callID: String, reason: String? = nil) {
    post(.command(.rejectCall(callID, reason: reason), requestID: nil))
  }

  /// Rejects an incoming call and returns once the relay accepted it.
  public func rejectCall(callID: String, reason: String? = nil) async throws(RelayError) {
    _ = try await request(.rejectCall(callID, reason: reason)).get()
  }

  /// Cancels this user's ringing call (`call.cancel`).
  public func cancelCall(callID: String) { post(.command(.cancelCall(callID), requestID: nil)) }

  /// Cancels this user's ringing call and returns once the relay accepted it.
  public func cancelCall(callID: String) async throws(RelayError) {
    _ = try await request(.cancelCall(callID)).get()
  }

  /// Ends an accepted call for every party (`call.end`).
  public func endCall(callID: String) { post(.command(.endCall(callID), requestID: nil)) }

  /// Ends an accepted call and returns once the relay accepted it.
  public func endCall(callID: String) async throws(RelayError) {
    _ = try await request(.endCall(callID)).get()
  }

  // MARK: Testing

  /// Kills the socket without a close frame, as a network failure would: the client
  /// reconnects and resumes. For tests of the resume path.
  func dropConnectionForTesting() { post(.dropConnection) }

  /// Kills the socket without a close frame and stops, as a device that vanished.
  func abandonForTesting() { post(.abandon) }
}
