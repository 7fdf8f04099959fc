// The §9a push state in snapshots (layout and rules in SnapshotEncode.swift / Snapshot-
// Decode.swift): the registrations, after the deadlines; a connection's `device` and a
// callee's pushed targets are written with them. Read back, every token and device id
// must be one `push.register` could have stored, and nothing the code assumes unique
// (a user's devices, a token, a device's kinds, a callee's pushed devices)
// may repeat.
import RelayProtocol

extension SnapshotWriter {
  /// Users sorted; each user's devices from least to most recently registered; each
  /// device's tokens in kind order.
  mutating func pushRegistry(_ registry: PushRegistry) {
    let uids = registry.byUser.keys.sorted()
    out.count(uids.count)
    for uid in uids {
      let devices = registry.byUser[uid, default: []]
      out.string(uid)
      out.count(devices.count)
      for d in devices {
        out.string(d.device)
        out.count(d.tokens.count)
        for t in d.tokens { pushToken(t.kind, t.token, t.environment) }
      }
    }
    counts(registry.jobs)
  }

  /// A callee's pushed targets (the uid is the callee's).
  mutating func pushTargets(_ targets: [PushTarget]) {
    out.count(targets.count)
    for t in targets {
      out.string(t.device)
      pushToken(t.kind, t.token, t.environment)
    }
  }

  private mutating func pushToken(_ kind: PushKind, _ token: String, _ environment: PushEnvironment) {
    out.string(kind.rawValue)
    out.string(token)
    out.string(environment.rawValue)
  }
}

extension SnapshotReader {
  mutating func pushRegistry() throws(BinaryError) -> PushRegistry {
    var registry = PushRegistry()
    for _ in 0..<(try r.count(minBytes: 8)) {
      let uid = try r.string()
      guard registry.byUser[uid] == nil else { throw r.error("push user \(uid) twice") }
      var devices: [PushDevice] = []
      for _ in 0..<(try r.count(minBytes: 8)) {
        var device = PushDevice(device: try deviceId())
        for _ in 0..<(try r.count(minBytes: 12)) { device.tokens.append(try pushToken()) }
        let ranks = device.tokens.map { PushRegistry.rank($0.kind) }
        guard !ranks.isEmpty, ranks == ranks.sorted(), Set(ranks).count == ranks.count else {
          throw r.error("push device without tokens, or kinds repeated or out of order")
        }
        devices.append(device)
      }
      try distinct(devices.map(\.device), "push device of a user")
      let tokens = devices.flatMap { $0.tokens.map(\.token) }
      try distinct(tokens, "push token of a user")
      guard !devices.isEmpty else { throw r.error("push user without devices") }
      guard tokens.allSatisfy({ registry.owners[$0] == nil }) else { throw r.error("push token of two users") }
      registry.set(uid, devices)
    }
    registry.jobs = try counts()
    return registry
  }

  mutating func pushTargets(uid: String) throws(BinaryError) -> [PushTarget] {
    var targets: [PushTarget] = []
    for _ in 0..<(try r.count(minBytes: 16)) {
      let device = try deviceId()
      let t = try pushToken()
      targets.append(PushTarget(uid: uid, device: device, token: t.token, kind: t.kind, environment: t.environment))
    }
    try distinct(targets.map(\.device), "pushed device of a callee")
    return targets
  }

  mutating func deviceId() throws(BinaryError) -> String {
    let device = try r.string()
    guard PushFields.isDevice(device) else { throw r.error("not a device id") }
    return device
  }

  private mutating func pushToken() throws(BinaryError) -> PushToken {
    let kind = try known(PushKind(rawValue: try r.string()), "push kind")
    let token = try r.string()
    let environment = try known(PushEnvironment(rawValue: try r.string()), "push environment")
    guard case .success(let canonical) = PushFields.canonicalToken(token, kind: kind.rawValue), canonical == token,
      kind.isAPNs || environment == .production
    else { throw r.error("not a push token of its kind") }
    return PushToken(kind: kind, token: token, environment: environment)
  }
}
