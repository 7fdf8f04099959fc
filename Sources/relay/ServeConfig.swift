import ArgumentParser
import RelayCore
import RelayServer

extension Serve {
  /// Resolves flags, then `RELAY_*` variables, then the contract's defaults.
  func makeConfig() throws -> ServerConfig {
    var core = CoreConfig(devMode: true, serverVersion: RelayVersion.string)
    var c = ServerConfig(core: core)
    let (host, port) = try Self.parseListen(listen ?? Env.string("listen") ?? "127.0.0.1:8080")
    c.host = host
    c.port = port
    c.echo = echo || Env.string("echo") == "1" || Env.string("echo") == "true"
    c.secret = secret ?? Env.string("secret")
    c.adminKey = adminKey ?? Env.string("admin-key")
    // The demo is for trying the relay out, so dev mode shows it unless told not to.
    c.demo = try demo ?? Env.bool("demo") ?? (c.secret == nil)
    c.webhookURL = webhookURL ?? Env.string("webhook-url")
    c.webhookSecret = webhookSecret ?? Env.string("webhook-secret")
    try applyOutbound(&c)
    func pick(_ v: Int?, _ flag: String) throws -> Int? {
      if let v {
        guard v >= 0 else { throw ValidationError("--\(flag) must not be negative") }
        return v
      }
      return try Env.int(flag)
    }
    // Durations are added to clock readings: bounded so that no sum can overflow.
    func pickMs(_ v: Int?, _ flag: String) throws -> Int64? {
      guard let ms = try pick(v, flag) else { return nil }
      guard (0...Self.maxDurationMs).contains(ms) else { throw ValidationError("--\(flag) must be 0...\(Self.maxDurationMs) ms") }
      return Int64(ms)
    }
    if let v = try pick(maxMessageBytes, "max-message-bytes") {
      // The WebSocket codec keeps the limit in 32 bits (RFC 6455 allows more; a relay
      // of signaling messages never needs it).
      guard v <= 1 << 30 else { throw ValidationError("--max-message-bytes must be at most 1073741824") }
      c.maxMessageBytes = v
      core.maxMessageBytes = v
    }
    if let v = try pick(maxOutboundBytes, "max-outbound-bytes") { c.maxOutboundBytes = v }
    if let v = try pick(outboundBudgetBytes, "outbound-budget-bytes") { c.outboundBudgetBytes = v }
    if let v = try pick(socketSendBufferBytes, "socket-send-buffer-bytes") {
      guard v <= 1 << 30 else { throw ValidationError("--socket-send-buffer-bytes must be at most 1073741824") }
      c.socketSendBufferBytes = v
    }
    if let v = try pickMs(drainTimeout, "drain-timeout") { c.drainTimeoutMs = v }
    if let v = try pick(maxParticipants, "max-participants") { core.maxParticipants = v }
    if let v = try pick(maxSessionsPerConnection, "max-sessions-per-connection") { core.maxSessionsPerConnection = v }
    if let v = try pick(maxBadMessages, "max-bad-messages") { core.maxBadMessages = v }
    if let v = try pick(messageRate, "message-rate") { core.messageRate = v }
    if let v = try pick(joinRate, "join-rate") { core.joinRate = v }
    if let v = try pick(sessionJoinRate, "session-join-rate") { core.sessionJoinRate = v }
    if let v = try pick(maxNameBytes, "max-name-bytes") { core.maxNameBytes = v }
    if let v = try pick(maxAvatarBytes, "max-avatar-bytes") { core.maxAvatarBytes = v }
    if let v = try pickMs(heartbeatInterval, "heartbeat-interval") { core.heartbeatIntervalMs = v }
    if let v = try pickMs(heartbeatTimeout, "heartbeat-timeout") { core.heartbeatTimeoutMs = v }
    if let v = try pickMs(grace, "grace") { core.graceMs = v }
    if let v = try pickMs(backgroundGrace, "background-grace") { core.backgroundGraceMs = v }
    if let v = try pickMs(idleTimeout, "idle-timeout") { core.idleTimeoutMs = v }
    if let v = try pick(replayEvents, "replay-events") { core.replayEvents = v }
    if let v = try pickMs(replayAge, "replay-age") { core.replayAgeMs = v }
    if let v = try pick(replayBytes, "replay-bytes") { core.replayBytes = v }
    if let v = try pick(replayBudgetBytes, "replay-budget-bytes") { core.replayBudgetBytes = v }
    if let v = try pick(maxEndedCalls, "max-ended-calls") { core.maxEndedCalls = v }
    if let v = try pick(maxEndedCallBytes, "max-ended-call-bytes") { core.maxEndedCallBytes = v }
    if let v = try pickMs(ringTimeout, "ring-timeout") { core.ringTimeoutMs = v }
    if let v = try pick(ringRate, "ring-rate") { core.ringRate = v }
    if let v = try pickMs(helloTimeout, "hello-timeout") { core.helloTimeoutMs = v }
    if let v = try pick(maxPushDevices, "max-push-devices") { core.maxPushDevices = try Self.atLeastOne(v, "max-push-devices") }
    core.devMode = c.secret == nil
    core.serverVersion = RelayVersion.string
    c.core = core
    return c
  }

  /// A count that must be at least 1 (0 would keep nothing).
  static func atLeastOne(_ v: Int, _ flag: String) throws -> Int {
    guard v >= 1 else { throw ValidationError("--\(flag) must be at least 1") }
    return v
  }

  /// `HOST:PORT`, `[v6]:PORT`, or `:PORT` (loopback).
  static func parseListen(_ s: String) throws -> (String, Int) {
    guard let colon = s.lastIndex(of: ":") else { throw ValidationError("--listen wants HOST:PORT, got \(s)") }
    var host = String(s[..<colon])
    guard let port = Int(s[s.index(after: colon)...]), (0...65535).contains(port) else {
      throw ValidationError("--listen has an invalid port: \(s)")
    }
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    if host.isEmpty { host = "127.0.0.1" }
    if host == "localhost" { host = "127.0.0.1" }
    return (host, port)
  }
}

extension Serve {
  /// `--tls-ca-file`, then the outbound settings' check. Contract §11: a setting
  /// that cannot work stops the start (exit 64), never "webhooks disabled" while
  /// running.
  func applyOutbound(_ c: inout ServerConfig) throws {
    c.tlsCAFile = tlsCAFile ?? Env.string("tls-ca-file")
    if c.webhookURL?.isEmpty == true { c.webhookURL = nil }
    if let problem = c.outboundSettingsProblem() { throw ValidationError(problem) }
  }
}

extension Serve {
  /// The longest duration a flag may set: ten years.
  static let maxDurationMs = 315_360_000_000
}

enum RelayVersion {
  static let string = "0.1.0"
}
