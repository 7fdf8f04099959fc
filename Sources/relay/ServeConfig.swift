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
    func pick(_ v: Int?, _ flag: String) throws -> Int? {
      if let v {
        guard v >= 0 else { throw ValidationError("--\(flag) must not be negative") }
        return v
      }
      return try Env.int(flag)
    }
    if let v = try pick(maxMessageBytes, "max-message-bytes") { c.maxMessageBytes = v; core.maxMessageBytes = v }
    if let v = try pick(maxOutboundBytes, "max-outbound-bytes") { c.maxOutboundBytes = v }
    if let v = try pick(drainTimeout, "drain-timeout") { c.drainTimeoutMs = Int64(v) }
    if let v = try pick(maxParticipants, "max-participants") { core.maxParticipants = v }
    if let v = try pick(maxSessionsPerConnection, "max-sessions-per-connection") { core.maxSessionsPerConnection = v }
    if let v = try pick(maxBadMessages, "max-bad-messages") { core.maxBadMessages = v }
    if let v = try pick(messageRate, "message-rate") { core.messageRate = v }
    if let v = try pick(heartbeatInterval, "heartbeat-interval") { core.heartbeatIntervalMs = Int64(v) }
    if let v = try pick(heartbeatTimeout, "heartbeat-timeout") { core.heartbeatTimeoutMs = Int64(v) }
    if let v = try pick(grace, "grace") { core.graceMs = Int64(v) }
    if let v = try pick(backgroundGrace, "background-grace") { core.backgroundGraceMs = Int64(v) }
    if let v = try pick(idleTimeout, "idle-timeout") { core.idleTimeoutMs = Int64(v) }
    if let v = try pick(replayEvents, "replay-events") { core.replayEvents = v }
    if let v = try pick(replayAge, "replay-age") { core.replayAgeMs = Int64(v) }
    if let v = try pick(ringTimeout, "ring-timeout") { core.ringTimeoutMs = Int64(v) }
    if let v = try pick(helloTimeout, "hello-timeout") { core.helloTimeoutMs = Int64(v) }
    core.devMode = c.secret == nil
    core.serverVersion = RelayVersion.string
    c.core = core
    return c
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

enum RelayVersion {
  static let string = "0.1.0"
}
