// Push to devices whose app is not running (PROTOCOL.md §9a; protocol/PROTOCOL.md
// §9a): the values the core hands the shell in `Effect.push`. The core decides which
// device gets which push and when; the shell's push service only performs it.
public import RelayProtocol

/// One token of one device of one user: where a push goes.
public struct PushTarget: Sendable, Equatable {
  public let uid: String
  public let device: String
  public let token: String
  public let kind: PushKind
  public let environment: PushEnvironment

  public init(uid: String, device: String, token: String, kind: PushKind, environment: PushEnvironment) {
    self.uid = uid
    self.device = device
    self.token = token
    self.kind = kind
    self.environment = environment
  }
}

/// What one push says.
public enum PushMessage: Sendable {
  /// The call rings this device: the `call.incoming` event object exactly as sockets
  /// get it (§9a: the payload alone lets an app report the call to CallKit).
  case ring(event: Payload)
  /// Ringing ended for a device that was pushed; `reason` as in `call.cancelled`.
  /// The §9a rules are already applied: `apns` and `fcm` targets get this for
  /// `cancelled`, `unanswered` and `caller_timed_out`; only `fcm` targets for
  /// `answered_elsewhere` / `rejected_elsewhere`. Never an `apns-voip` target: a
  /// device rung by VoIP gets its follow-up on its `apns` alert token, or none.
  case ended(reason: String)
}

/// One push to perform (`Effect.push`). In a cluster every replica derives the same
/// jobs; only the node that owns the record's side effects performs them.
public struct PushJob: Sendable {
  public let target: PushTarget
  public let callId: String
  public let sessionId: String
  public let callerUid: String
  public let callerName: String
  /// `audio` or `video`.
  public let callType: String
  /// The ring's `expiresAt` (Unix ms): APNs `apns-expiration`, FCM `ttl`; a retry
  /// after it is pointless.
  public let expiresAtWallMs: Int64
  public let message: PushMessage

  public init(
    target: PushTarget, callId: String, sessionId: String, callerUid: String, callerName: String,
    callType: String, expiresAtWallMs: Int64, message: PushMessage
  ) {
    self.target = target
    self.callId = callId
    self.sessionId = sessionId
    self.callerUid = callerUid
    self.callerName = callerName
    self.callType = callType
    self.expiresAtWallMs = expiresAtWallMs
    self.message = message
  }
}

extension PushJob: CustomStringConvertible {
  /// One line for logs and tests: `kind=… device=… uid=… call=… message=ring` (or
  /// `message=ended(<reason>)`). Tokens stay out of logs.
  public var description: String {
    let text: String
    switch message {
    case .ring: text = "ring"
    case .ended(let reason): text = "ended(\(reason))"
    }
    return "kind=\(target.kind.rawValue) device=\(target.device) uid=\(target.uid) call=\(callId) message=\(text)"
  }
}

/// Push counters for `/metrics` (§9a `relay_push_registrations`).
public struct PushStats: Sendable, Equatable {
  /// Registered tokens, all users together.
  public var registrations = 0
  /// Devices with at least one token.
  public var devices = 0
  /// `Effect.push` jobs the core asked for, by message (`ring`, `ended`).
  public var jobs: [String: UInt64] = [:]

  public init() {}
}
