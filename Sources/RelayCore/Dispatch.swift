// Routing of decoded commands (§2 envelope rules): reply before events, `ok` only
// when the command has an `id`, errors carry `re` when it does.
import RelayProtocol
import RelayPrimitives

/// One command being handled: who sent it, its `id`, and when.
struct Request {
  let connection: Connection
  let id: String?
  let at: Instant

  var c: ConnectionID { connection.id }
  /// The sender's identity; only valid after `hello` (dispatch guarantees it).
  var profile: Profile { connection.profile! }
  var identity: Profile { profile }
  var uid: String { profile.uid }
}

/// A command refused with an error reply; thrown before any state changes.
struct Refusal: Error {
  let code: ErrorCode
  let message: String

  init(_ code: ErrorCode, _ message: String) {
    self.code = code
    self.message = message
  }
}

extension RelayCore {
  func dispatch(_ envelope: Envelope, on connection: Connection, at: Instant) {
    let request = Request(connection: connection, id: envelope.id, at: at)
    do {
      if case .hello(let hello) = envelope.command {
        try handleHello(hello, request)
      } else if connection.phase != .ready {
        // §4.3: any other command before `welcome` → unauthorized, close 4501.
        sendError(connection.id, code: .unauthorized, message: "hello first", re: envelope.id)
        close(connection, code: CloseCode.unauthorized, reason: "command before hello", at: at)
        return
      } else {
        try handle(envelope.command, request)
      }
      connection.badMessages = 0  // §2: any accepted command resets the count
    } catch {
      refuse(request, error)
    }
  }

  func refuse(_ request: Request, _ refusal: Refusal) {
    if refusal.code.isBadMessage {
      let error = CommandError(code: refusal.code, message: refusal.message, re: request.id)
      rejectBadMessage(request.connection, error, at: request.at)
    } else {
      sendError(request.c, code: refusal.code, message: refusal.message, re: request.id)
      request.connection.badMessages = 0
    }
  }

  func handle(_ command: Command, _ request: Request) throws(Refusal) {
    switch command {
    case .hello: preconditionFailure("hello is dispatched apart")
    case .ping: sendPersonal(request.c, type: "pong", re: request.id)
    case .sessionJoin(let session): try join(session, request)
    case .sessionLeave(let session): try leave(session, request)
    case .participantRemove(let session, let uid): try removeByHost(session, uid: uid, request)
    case .handRaise(let session): try raiseHand(session, request)
    case .handLower(let session, let uid): try lowerHand(session, uid: uid, request)
    case .handLowerAll(let session): try lowerAllHands(session, request)
    case .messageSend(let session, let data): try sendMessage(session, data: data, request)
    case .clientBackground(let background):
      request.connection.background = background
      ok(request)
      if background { pushDeviceMayBeAsleep(request.connection, at: request.at) }
    case .callInitiate, .callAccept, .callReject, .callCancel, .callEnd:
      try handleCall(command, request)
    case .pushRegister, .pushUnregister:
      try handlePush(command, request)
    }
  }

  /// §2: `ok` only for commands with an `id`; sent before the events they cause.
  func ok(_ request: Request) {
    guard let id = request.id else { return }
    sendPersonal(request.c, type: "ok", re: id)
  }
}
