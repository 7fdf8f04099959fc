// Client → server commands (PROTOCOL.md §2–§9) as typed values. Decoding lives here,
// never in the core (DESIGN.md, "Layers").

/// `hello.dev` (§3): dev-mode login without a token.
public struct DevLogin: Sendable, Equatable {
  public var uid: String
  public var name: String
  public var avatar: String?
  /// Extension to the contract: optional `role` ("host" / "participant"), default
  /// participant, so host features can be exercised in dev mode.
  public var role: Role
}

/// `hello.resume` (§8): the resume token and the last seq seen per session, in the
/// order the client listed them (replay is emitted in that order).
public struct ResumeRequest: Sendable, Equatable {
  public var token: String
  public var sessions: [(session: String, seq: Int64)]

  public static func == (a: ResumeRequest, b: ResumeRequest) -> Bool {
    a.token == b.token && a.sessions.count == b.sessions.count
      && zip(a.sessions, b.sessions).allSatisfy { $0.session == $1.session && $0.seq == $1.seq }
  }
}

/// `hello` (§4): exactly one credential is used, depending on the server's mode.
public struct Hello: Sendable, Equatable {
  public var token: String?
  public var dev: DevLogin?
  public var resume: ResumeRequest?
  /// §4 `hello.device`: the app install the connection comes from (§9a push).
  public var device: String? = nil
  /// Optional features the client accepts (§4 `hello.capabilities`), as listed; names
  /// the server does not know are ignored, so clients may offer newer ones.
  public var capabilities: [String] = []
}

/// §4 capabilities the server may accept.
public enum Capability {
  /// §5.6: membership events of one session coalesced into `participants.diff`.
  public static let presenceDiff = "presence.diff"
  /// §5: a close frame with 1001 (going away: a page unloading or reloading, RFC 6455
  /// §7.4.1) leaves this connection's participant lost, not left, so the page that
  /// loads next resumes within grace.
  public static let resumeAfterUnload = "resume.after_unload"
}

/// `call.initiate.callType` (§9).
public enum CallType: String, Sendable, Equatable {
  case audio, video
}

/// `call.reject.reason` (§9), default declined.
public enum RejectReason: String, Sendable, Equatable {
  case declined, busy
}

/// One decoded command.
public enum Command: Sendable, Equatable {
  case hello(Hello)
  case ping
  case sessionJoin(session: String)
  case sessionLeave(session: String)
  case participantRemove(session: String, uid: String)
  case handRaise(session: String)
  case handLower(session: String, uid: String?)
  case handLowerAll(session: String)
  /// `data` is the compact encoding of the sender's value (≤ 8 192 bytes, §7a), ready
  /// to splice into the `message` event.
  case messageSend(session: String, data: [UInt8])
  case clientBackground(background: Bool)
  case callInitiate(to: [String], callType: CallType, metadata: JSONObject?)
  case callAccept(callId: String)
  case callReject(callId: String, reason: RejectReason)
  case callCancel(callId: String)
  case callEnd(callId: String)
  /// §9a `push.register` (fields checked by `PushFields`).
  case pushRegister(PushRegistrationFields)
  /// §9a `push.unregister {token}` (token canonical).
  case pushUnregister(token: String)

  /// The wire `type` of this command (metrics label).
  public var typeName: String {
    switch self {
    case .hello: return "hello"
    case .ping: return "ping"
    case .sessionJoin: return "session.join"
    case .sessionLeave: return "session.leave"
    case .participantRemove: return "participant.remove"
    case .handRaise: return "hand.raise"
    case .handLower: return "hand.lower"
    case .handLowerAll: return "hand.lower_all"
    case .messageSend: return "message.send"
    case .clientBackground: return "client.background"
    case .callInitiate: return "call.initiate"
    case .callAccept: return "call.accept"
    case .callReject: return "call.reject"
    case .callCancel: return "call.cancel"
    case .callEnd: return "call.end"
    case .pushRegister: return "push.register"
    case .pushUnregister: return "push.unregister"
    }
  }

  /// Every command type the decoder knows (§2 `unknown_type` for anything else).
  public static let knownTypes: [String] = [
    "hello", "ping", "session.join", "session.leave", "participant.remove", "hand.raise",
    "hand.lower", "hand.lower_all", "message.send", "client.background", "call.initiate",
    "call.accept", "call.reject", "call.cancel", "call.end", "push.register", "push.unregister",
  ]
}

/// A command with its optional correlation id (§2 envelope).
public struct Envelope: Sendable, Equatable {
  public var id: String?
  public var command: Command

  public init(id: String?, command: Command) {
    self.id = id
    self.command = command
  }
}

/// Why a message was refused before reaching the core. `re` is the command's `id`
/// when it could be read; `type` the command type when known (metrics).
public struct CommandError: Error, Sendable, Equatable {
  public var code: ErrorCode
  public var message: String
  public var re: String?
  public var type: String?

  public init(code: ErrorCode, message: String, re: String? = nil, type: String? = nil) {
    self.code = code
    self.message = message
    self.re = re
    self.type = type
  }
}

/// Size limits the decoder enforces (all map to `bad_request`).
public struct DecoderLimits: Sendable {
  /// §7a: compact encoding of `message.send.data`.
  public var maxDataBytes = 8_192
  /// §9: compact encoding of `call.initiate.metadata`.
  public var maxMetadataBytes = 4_096
  /// §9: callees per call.
  public var maxCallees = 32
  /// Session ids, uids, call ids, names: a generous cap against memory abuse.
  public var maxIdentifierBytes = 256

  public init() {}
}
