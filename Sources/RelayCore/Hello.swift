// `hello` → `welcome` (§3 identity, §4 lifecycle), with resume (§8) and the delivery
// of calls still ringing (§9).
import RelayProtocol
import RelayPrimitives

extension RelayCore {
  func handleHello(_ hello: Hello, _ request: Request) throws(Refusal) {
    let connection = request.connection
    guard connection.phase == .awaitingHello else {
      throw Refusal(.conflict, "hello was already accepted on this connection")
    }
    guard let identity = try authenticate(hello, request) else { return }
    guard identityWithinBounds(identity, request) else { return }
    let publicId = ids.token(byteCount: 12)
    let resumeToken = ids.token(byteCount: 24)
    connection.profile = Profile(identity, token: ResumeToken(resumeToken))
    connection.phase = .ready
    connection.device = hello.device
    if hello.capabilities.contains(Capability.presenceDiff) {
      connection.acceptsPresenceDiff = true
      presenceDiffCapable += 1
    }
    connection.goingAwayIsLost = hello.capabilities.contains(Capability.resumeAfterUnload)
    userConnections.append(connection)
    snapshotTouch(user: identity.uid)
    snapshotTouch(connection)
    let resumed = resumeHeldState(hello.resume, request)  // §8, before `welcome`
    sendWelcome(request, publicId: publicId, resumeToken: resumeToken, resumed: resumed, offered: hello.capabilities)
    deliverRingingCalls(to: connection, at: request.at)
    if resumed { replayResumed(hello.resume, request) }
  }

  /// §3: dev mode takes only `hello.dev` (every dev user may join any session); token
  /// mode only a valid `hello.token`. The wrong credential, or a refused token, is
  /// `unauthorized` + close 4501 (nil); no credential at all is a `bad_request` (the
  /// client may still send a proper hello before the deadline).
  func authenticate(_ hello: Hello, _ request: Request) throws(Refusal) -> Identity? {
    if config.devMode {
      if let dev = hello.dev {
        return Identity(
          uid: dev.uid, name: dev.name, avatar: dev.avatar, role: dev.role, sessions: .any)
      }
      if hello.token != nil {
        refuseHello(request, "dev mode accepts only hello.dev")
        return nil
      }
      throw Refusal(.badRequest, "hello needs dev {uid, name}")
    }
    if let token = hello.token {
      if let identity = verifyToken(token, request.at.wallMs) { return identity }
      refuseHello(request, "invalid or expired token")
      return nil
    }
    if hello.dev != nil {
      refuseHello(request, "hello.dev is accepted only in dev mode")
      return nil
    }
    throw Refusal(.badRequest, "hello needs a token")
  }

  /// §3: `name` ≤ `--max-name-bytes`, `avatar` ≤ `--max-avatar-bytes` (UTF-8), from
  /// `hello.dev` and token claims alike. Every member's snapshot and every
  /// `participant.*` event carries them, so an unbounded name multiplies into the
  /// fan-out of every join. Refused with `bad_request` and close 4501: the identity
  /// itself is unacceptable, another `hello` on this connection would not fix it.
  func identityWithinBounds(_ identity: Identity, _ request: Request) -> Bool {
    var problem: String?
    if identity.name.utf8.count > config.maxNameBytes {
      problem = "hello: name exceeds \(config.maxNameBytes) bytes"
    } else if let avatar = identity.avatar, avatar.utf8.count > config.maxAvatarBytes {
      problem = "hello: avatar exceeds \(config.maxAvatarBytes) bytes"
    }
    guard let problem else { return true }
    sendError(request.c, code: .badRequest, message: problem, re: request.id)
    close(request.connection, code: CloseCode.unauthorized, reason: "identity too large", at: request.at)
    return false
  }

  func refuseHello(_ request: Request, _ message: String) {
    sendError(request.c, code: .unauthorized, message: message, re: request.id)
    close(request.connection, code: CloseCode.unauthorized, reason: "unauthorized", at: request.at)
  }

  /// §4 `welcome {connectionId, resumeToken, user, heartbeat, resumed, server}`.
  /// `capabilities`: those of `offered` the server accepted, only when some were offered.
  func sendWelcome(_ request: Request, publicId: String, resumeToken: String, resumed: Bool, offered: [String] = []) {
    let identity = request.identity
    sendPersonal(request.c, type: "welcome", re: request.id) { w in
      w.field("connectionId", publicId)
      w.field("resumeToken", resumeToken)
      w.key("user")
      w.beginObject()
      w.field("uid", identity.uid)
      w.field("name", identity.name)
      w.optionalField("avatar", identity.avatar)
      w.field("role", identity.role.rawValue)
      w.endObject()
      w.key("heartbeat")
      w.beginObject()
      w.field("interval", config.heartbeatIntervalMs)
      w.field("timeout", config.heartbeatTimeoutMs)
      w.endObject()
      w.field("resumed", resumed)
      w.key("server")
      w.beginObject()
      w.field("version", config.serverVersion)
      w.endObject()
      if !offered.isEmpty {
        w.key("capabilities")
        w.beginArray()
        if offered.contains(Capability.presenceDiff) { w.string(Capability.presenceDiff) }
        if offered.contains(Capability.resumeAfterUnload) { w.string(Capability.resumeAfterUnload) }
        w.endArray()
      }
    }
  }

  /// §3: lets `uid` join `session` whatever its token claims (call sessions).
  func grant(_ session: String, to uid: String) {
    grantedSessions[uid, default: []].insert(session)
  }
}
