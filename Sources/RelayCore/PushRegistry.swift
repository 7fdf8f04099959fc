// Push registrations (PROTOCOL.md §9a): per user, per device, one token per kind; a
// token is held once (one user, one device, one kind): registered again anywhere, it
// moves there.
// State like sessions and calls: independent of connections, kept in snapshots and
// replicated by the cluster log. Bounded per user: at most `maxPushDevices` devices
// (the least recently registered goes first), one token of each of the three kinds
// per device, each token at most 4 096 bytes and each device id at most 128.
public import RelayProtocol

/// One token of a device.
struct PushToken: Equatable {
  let kind: PushKind
  let token: String
  let environment: PushEnvironment
}

/// One device of a user and its tokens, in `PushKind.allCases` order.
struct PushDevice: Equatable {
  let device: String
  var tokens: [PushToken] = []

  func token(_ kind: PushKind) -> PushToken? { tokens.first { $0.kind == kind } }
}

/// Every registration the core holds.
struct PushRegistry {
  /// Per user, its devices from least to most recently registered.
  var byUser: [String: [PushDevice]] = [:]
  /// Tokens held, all users together (`relay_push_registrations`).
  var count = 0
  /// Who holds each token: a token is one app install's, so it belongs to one user
  /// (the app signed in as another user registers it again: it moves).
  var owners: [String: String] = [:]
  var jobs: [String: UInt64] = [:]

  func devices(of uid: String) -> [PushDevice] { byUser[uid] ?? [] }

  /// Stores `token` for (uid, device, kind), replacing that kind's old token. The
  /// device becomes the most recently registered; the same token under another device
  /// of the user moves here (one app install, one token); past `maxDevices` the least
  /// recently registered devices go.
  mutating func register(uid: String, device: String, _ token: PushToken, maxDevices: Int) {
    if let previous = owners[token.token], previous != uid { remove(uid: previous, token: token.token) }
    var list = byUser[uid] ?? []
    var entry = list.first { $0.device == device } ?? PushDevice(device: device)
    list.removeAll { $0.device == device }
    for k in list.indices { list[k].tokens.removeAll { $0.token == token.token } }
    list.removeAll { $0.tokens.isEmpty }
    entry.tokens.removeAll { $0.kind == token.kind || $0.token == token.token }
    entry.tokens.append(token)
    entry.tokens.sort { Self.rank($0.kind) < Self.rank($1.kind) }
    list.append(entry)
    if list.count > max(1, maxDevices) { list.removeFirst(list.count - max(1, maxDevices)) }
    set(uid, list)
  }

  /// Removes `token` from every device of `uid`; false if it held none.
  @discardableResult
  mutating func remove(uid: String, token: String) -> Bool {
    guard var list = byUser[uid], list.contains(where: { $0.tokens.contains { $0.token == token } }) else { return false }
    for k in list.indices { list[k].tokens.removeAll { $0.token == token } }
    list.removeAll { $0.tokens.isEmpty }
    set(uid, list)
    return true
  }

  /// Forgets a device of `uid` with all its tokens; false if there was none.
  @discardableResult
  mutating func remove(uid: String, device: String) -> Bool {
    guard var list = byUser[uid], list.contains(where: { $0.device == device }) else { return false }
    list.removeAll { $0.device == device }
    set(uid, list)
    return true
  }

  /// Replaces a user's list, keeping `count` and `owners` exact.
  mutating func set(_ uid: String, _ list: [PushDevice]) {
    for d in byUser[uid] ?? [] {
      count -= d.tokens.count
      for t in d.tokens { owners[t.token] = nil }
    }
    for d in list {
      count += d.tokens.count
      for t in d.tokens { owners[t.token] = uid }
    }
    byUser[uid] = list.isEmpty ? nil : list
  }

  static func rank(_ kind: PushKind) -> Int { PushKind.allCases.firstIndex(of: kind) ?? 0 }
}

/// `PUT|DELETE /v1/push/devices/{device}` (§9a), as the shell parsed it.
public enum PushDeviceAction: Sendable, Equatable {
  case register(PushRegistrationFields)
  case unregister
}

extension RelayCore {
  // MARK: Commands

  func handlePush(_ command: Command, _ request: Request) throws(Refusal) {
    switch command {
    case .pushRegister(let fields):
      guard let device = fields.device ?? request.connection.device else {
        throw Refusal(.badRequest, "push.register: device is needed (here or in hello.device)")
      }
      register(uid: request.uid, device: device, fields)
      ok(request)
    case .pushUnregister(let token):
      push.remove(uid: request.uid, token: token)
      ok(request)
    default:
      preconditionFailure("not a push command: \(command.typeName)")
    }
  }

  func register(uid: String, device: String, _ fields: PushRegistrationFields) {
    // Kinds and environments were checked by `PushFields`.
    let kind = PushKind(rawValue: fields.kind) ?? .fcm
    let environment = fields.environment.flatMap(PushEnvironment.init(rawValue:)) ?? .production
    let token = PushToken(kind: kind, token: fields.token, environment: environment)
    push.register(uid: uid, device: device, token, maxDevices: config.maxPushDevices)
  }

  // MARK: HTTP and replicated inputs

  /// `PUT /v1/push/devices/{device}` → 204, `DELETE` → 204 (also for a device that was
  /// not registered: the end state is what was asked), 400 with an error body for a
  /// bad device id or body. `identity` is already authenticated.
  public func pushDeviceAction(_ action: PushDeviceAction, device: String, identity: Identity, at: Instant) -> CallHTTPResult {
    guard PushFields.isDevice(device) else {
      counters.errorsByCode[ErrorCode.badRequest.rawValue, default: 0] += 1
      return CallHTTPResult(status: 400, body: callErrorBody(.badRequest, "device must be 1–128 bytes of A-Z a-z 0-9 . _ : -"))
    }
    switch action {
    case .register(let fields):
      register(uid: identity.uid, device: device, fields)
    case .unregister:
      push.remove(uid: identity.uid, device: device)
    }
    return CallHTTPResult(status: 204, body: [])
  }

  /// The provider said `token` is gone (APNs 410, `BadDeviceToken`,
  /// `DeviceTokenNotForTopic`; FCM `UNREGISTERED`): the registration is removed. A
  /// replicated input, so every node of a cluster removes it. False if `uid` held no
  /// such token (already removed, or re-registered since under another token).
  @discardableResult
  public func removePushToken(uid: String, token: String, at: Instant) -> Bool {
    push.remove(uid: uid, token: PushFields.unregisterToken(token) ?? token)
  }

  /// Push counters for `/metrics`.
  public var pushStats: PushStats {
    var s = PushStats()
    s.registrations = push.count
    s.devices = push.byUser.values.reduce(0) { $0 + $1.count }
    s.jobs = push.jobs
    return s
  }

  /// The targets registered for `uid`, for tests and tools: (device, kind, token).
  public func pushRegistrations(of uid: String) -> [PushTarget] {
    push.devices(of: uid).flatMap { d in
      d.tokens.map { PushTarget(uid: uid, device: d.device, token: $0.token, kind: $0.kind, environment: $0.environment) }
    }
  }
}
