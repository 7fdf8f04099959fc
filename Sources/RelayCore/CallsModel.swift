// The state of ringing (PROTOCOL.md §9, protocol/PROTOCOL.md §10): calls, their
// callees, and the per-user indexes the rules need. Reference types because a call is
// updated in place through several tables; everything that reaches output is iterated
// in arrays (creation order, `to` order), never in dictionary order, so the core stays
// deterministic (DESIGN.md, "Why the core is a pure state machine").
public import RelayProtocol

/// One callee's place in a call (§9 "exactly one terminal outcome per callee"): it
/// starts `ringing` (or `busy`) and leaves `ringing` once, for accepted, rejected,
/// cancelled or unanswered; only `accepted` moves on, to `ended`.
public enum CalleeState: String, Sendable {
  case ringing, accepted, rejected, cancelled, busy, unanswered, ended

  /// True once the callee's one outcome is decided.
  var isDecided: Bool { self != .ringing }
}

/// `call.cancelled.reason` (§9, §5).
enum CancelReason: String {
  case cancelled
  case answeredElsewhere = "answered_elsewhere"
  case rejectedElsewhere = "rejected_elsewhere"
  case unanswered
  case callerTimedOut = "caller_timed_out"
}

/// `call.ended.reason` (§9, §5).
enum EndReason: String {
  case ended
  case timedOut = "timed_out"
}

/// Who placed a call, as shown in `call.incoming.from` (§9).
struct CallCaller {
  let uid: String
  let name: String
  let avatar: String?
}

/// One callee of one call.
final class Callee {
  let uid: String
  var state: CalleeState
  /// Connections that were shown `call.incoming` and have not had their own terminal
  /// message yet, in the order they started ringing.
  var devices: [ConnectionID] = []
  /// Connections that already got their terminal `call.cancelled` (answered or rejected
  /// elsewhere): they get nothing more about this call.
  var done: [ConnectionID] = []
  /// The connection that accepted (nil for an HTTP accept, §9 "for an app woken by a
  /// push before its socket is up").
  var acceptedBy: ConnectionID?
  /// No online connection when the call started: the webhook got `call.offline`, so it
  /// also gets `call.cancelled` when the ring stops (§11).
  var wasOffline = false
  /// `call.reject.reason`, for the idempotent HTTP answer and the call object.
  var rejectReason: RejectReason?
  /// Why the ring stopped when the state is `cancelled`.
  var cancelReason: CancelReason?
  /// §9a devices sent a ring push for this call, one target each, in push order;
  /// emptied when their follow-up goes out (PushRinging.swift).
  var pushed: [PushTarget] = []

  init(uid: String, state: CalleeState) {
    self.uid = uid
    self.state = state
  }
}

/// One call (§9).
final class Call {
  let id: String
  let sessionId: String
  let caller: CallCaller
  /// The connection that sent `call.initiate`: the caller's events go there while it
  /// is open (a caller's other devices did not place the call).
  let callerConnection: ConnectionID
  /// `to` without duplicates, in the caller's order.
  let to: [String]
  let callType: CallType
  /// `metadata` as the caller sent it, compactly encoded once.
  let metadata: [UInt8]?
  let createdAtWallMs: Int64
  let expiresAtWallMs: Int64
  let ringDeadlineMonoMs: Int64
  var callees: [Callee] = []
  /// Monotonic ms of the first accept (`call.ended.duration` counts from it, §9).
  var acceptedAtMonoMs: Int64?
  /// Set once the call is ended (`call.end`, or a party timed out).
  var endedBy: String?
  var endReason: EndReason?
  var endDurationMs: Int64?
  /// The caller used `call.cancel` (HTTP repeats of it answer 200, §9 idempotence).
  var cancelledByCaller = false
  /// Set when the call reaches its final state and leaves the per-user index.
  var finishedAtMonoMs: Int64?
  /// `call.incoming`, encoded once and sent to every ringing device, late ones too.
  var incoming: Payload?

  convenience init(
    id: String, sessionId: String, caller: CallCaller, callerConnection: ConnectionID, to: [String],
    callType: CallType, metadata: [UInt8]?, at: Instant, ringTimeoutMs: Int64
  ) {
    self.init(
      id: id, sessionId: sessionId, caller: caller, callerConnection: callerConnection, to: to,
      callType: callType, metadata: metadata, createdAtWallMs: at.wallMs,
      expiresAtWallMs: at.wallMs + ringTimeoutMs, ringDeadlineMonoMs: at.monoMs + ringTimeoutMs)
  }

  /// A call with its times given: as `init(…at:ringTimeoutMs:)` made it, or as a
  /// snapshot describes it (SnapshotEncode.swift).
  init(
    id: String, sessionId: String, caller: CallCaller, callerConnection: ConnectionID, to: [String],
    callType: CallType, metadata: [UInt8]?, createdAtWallMs: Int64, expiresAtWallMs: Int64,
    ringDeadlineMonoMs: Int64
  ) {
    self.id = id
    self.sessionId = sessionId
    self.caller = caller
    self.callerConnection = callerConnection
    self.to = to
    self.callType = callType
    self.metadata = metadata
    self.createdAtWallMs = createdAtWallMs
    self.expiresAtWallMs = expiresAtWallMs
    self.ringDeadlineMonoMs = ringDeadlineMonoMs
  }

  func callee(_ uid: String) -> Callee? { callees.first { $0.uid == uid } }

  var isRinging: Bool { callees.contains { $0.state == .ringing } }
  var isAccepted: Bool { acceptedAtMonoMs != nil }
  var isEnded: Bool { endedBy != nil }
  /// Accepted and not ended: its parties are busy for other calls (§9 "Busy").
  var isInProgress: Bool { isAccepted && !isEnded }
  /// Nothing more can happen: ended, or never accepted and nobody rings any more.
  var isOver: Bool { isEnded || (!isAccepted && !isRinging) }

  /// The call object's `state`: `ringing`, `accepted` or `ended` while those hold;
  /// a call that was never accepted is named by the outcome that closed it.
  var stateName: String {
    if isEnded { return "ended" }
    if isAccepted { return "accepted" }
    if isRinging { return "ringing" }
    for outcome in [CalleeState.unanswered, .cancelled, .rejected] where callees.contains(where: { $0.state == outcome }) {
      return outcome.rawValue
    }
    return CalleeState.busy.rawValue
  }

  /// Whether `uid` is the caller or an accepted callee of this call in progress.
  func isInCall(_ uid: String) -> Bool {
    guard isInProgress else { return false }
    return uid == caller.uid || callee(uid)?.state == .accepted
  }
}

/// Timers of the ringing work, carried by `DeadlineKind.call`.
enum CallDeadline: Equatable {
  /// §9 `--ring-timeout`: callees still ringing become unanswered.
  case ring(callId: String)
  /// A finished call is forgotten after `CallBook.retentionMs` (until then a repeated
  /// HTTP action or a late command still gets its idempotent answer or `conflict`).
  case purge(callId: String)
}

/// What an HTTP call action asks for (§9 `POST /v1/calls/{callId}/accept|reject|cancel`).
public enum CallAction: Sendable, Equatable {
  case accept
  case reject(RejectReason)
  case cancel
}

/// The answer to an HTTP call request: status 200 (call object), 403, 404 or 409
/// (`{type: "error", code, message}`), body ready to send.
public struct CallHTTPResult: Sendable, Equatable {
  public var status: Int
  public var body: [UInt8]
}

/// Counters of call outcomes for `/metrics` (§10 "call outcomes").
public struct CallStats: Sendable, Equatable {
  public var initiated: UInt64 = 0
  /// Callee outcomes by `CalleeState` name (accepted, rejected, busy, …).
  public var outcomes: [String: UInt64] = [:]
  /// Webhook events the core asked for, by event name.
  public var webhooks: [String: UInt64] = [:]
  /// Calls held in memory (live and recently finished).
  public var held = 0
  /// Finished calls kept for idempotent repeats, their bytes, and how many were
  /// forgotten early by `--max-ended-calls` / `--max-ended-call-bytes`.
  public var finishedHeld = 0
  public var finishedBytes = 0
  public var finishedEvicted: UInt64 = 0

  public init() {}
}

/// Every piece of ringing state the core holds.
struct CallBook {
  /// How long a finished call is kept for late commands and idempotent HTTP repeats.
  static let retentionMs: Int64 = 300_000

  var calls: [String: Call] = [:]
  /// Calls not yet over, by party uid (caller and every callee), in creation order:
  /// busy checks, delivery on `hello`, and the §5 timed-out rules look here.
  var live: [String: [Call]] = [:]
  /// §9: monotonic ms of each user's `call.initiate` within the last 60 000 ms.
  var initiateWindows: [String: [Int64]] = [:]
  /// §10.1 `--ring-rate`: monotonic ms of the calls that rang each callee uid within
  /// the last `ringWindowMs` (at most `ringRate` each; looked up, never iterated).
  var ringWindows: [String: [Int64]] = [:]
  var stats = CallStats()
  /// Finished calls awaiting their purge, bounded (FinishedCalls.swift).
  var finished = FinishedCalls()

  static let initiateLimit = 10
  static let initiateWindowMs: Int64 = 60_000

  mutating func index(_ call: Call) {
    live[call.caller.uid, default: []].append(call)
    for uid in call.to { live[uid, default: []].append(call) }
  }

  mutating func unindex(_ call: Call) {
    for uid in [call.caller.uid] + call.to {
      live[uid]?.removeAll { $0 === call }
      if live[uid]?.isEmpty == true { live[uid] = nil }
    }
  }

  /// Live calls of `uid`, in creation order.
  func liveCalls(of uid: String) -> [Call] { live[uid] ?? [] }
}
