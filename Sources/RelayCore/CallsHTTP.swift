// The call API for apps woken by a push before their socket is up (§9; protocol/
// §11): `GET /v1/calls/{callId}` and `POST /v1/calls/{callId}/accept|reject|cancel`.
// Same rules and events as the commands; repeating an action already done returns
// the same result (idempotent); 404 for unknown calls and non-parties alike.
public import RelayProtocol

extension RelayCore {
  /// `GET /v1/calls/{callId}`: the call object, or nil (→ 404) when the call is
  /// unknown or `uid` is not a party.
  public func callInfo(callId: String, uid: String) -> [UInt8]? {
    guard let call = try? partyCall(callId, uid: uid) else { return nil }
    return callObject(call)
  }

  /// `POST /v1/calls/{callId}/{action}` by `identity` (already authenticated by the
  /// shell). 200 with the call object after the action; 404, 403 (the other side's
  /// action) or 409 (conflict) with `{type: "error", code, message}`.
  public func callAction(_ action: CallAction, callId: String, identity: Identity, at: Instant) -> CallHTTPResult {
    do {
      let call = try partyCall(callId, uid: identity.uid)
      try apply(action, to: call, uid: identity.uid, at: at)
      return CallHTTPResult(status: 200, body: callObject(call))
    } catch {
      counters.errorsByCode[error.code.rawValue, default: 0] += 1
      return CallHTTPResult(status: Self.httpStatus(error.code), body: callErrorBody(error.code, error.message))
    }
  }

  /// Verifies a user's bearer token with the same verifier as `hello.token` (§3). In
  /// dev mode there is no secret, so no token is valid: the call API answers 401.
  public func verifyUserToken(_ token: String, at: Instant) -> Identity? {
    verifyToken(token, at.wallMs)
  }

  /// Call outcome counters for `/metrics`.
  public var callStats: CallStats {
    var snapshot = calls.stats
    snapshot.held = calls.calls.count
    snapshot.finishedHeld = calls.finished.count
    snapshot.finishedBytes = calls.finished.bytes
    snapshot.finishedEvicted = calls.finished.evicted
    return snapshot
  }

  func apply(_ action: CallAction, to call: Call, uid: String, at: Instant) throws(Refusal) {
    switch action {
    case .accept:
      // Idempotent: the callee's accept already happened (even if the call ended since).
      if let callee = call.callee(uid), callee.state == .accepted || callee.state == .ended { return }
      let callee = try answeringCallee(call, uid: uid, verb: "accept")
      accept(call, callee, on: nil, at: at)
    case .reject(let reason):
      if call.callee(uid)?.state == .rejected { return }
      let callee = try answeringCallee(call, uid: uid, verb: "reject")
      reject(call, callee, reason: reason, on: nil, at: at)
    case .cancel:
      if call.caller.uid == uid, call.cancelledByCaller, !call.isRinging { return }
      try checkCancel(call, uid: uid)
      cancel(call, at: at)
    }
  }

  static func httpStatus(_ code: ErrorCode) -> Int {
    switch code {
    case .notFound: return 404
    case .forbidden: return 403
    case .conflict: return 409
    case .badRequest: return 400
    default: return 500
    }
  }
}
