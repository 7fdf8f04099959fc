import EventLoop
import RelayCore
import RelayProtocol
import RelayCluster

extension RelayServer {
  /// Admin API (contract §10); the caller has checked the bearer key.
  func routeAdmin(_ conn: ServerConnection, _ method: String, _ parts: [String], body: [UInt8]) {
    switch (method, parts.count) {
    case ("POST", 2) where parts[1] == "sessions":
      admin(conn, .createSession)
    case ("GET", 3) where parts[1] == "sessions":
      admin(conn, .sessionInfo(session: parts[2]))
    case ("DELETE", 5) where parts[1] == "sessions" && parts[3] == "participants":
      admin(conn, .removeParticipant(session: parts[2], uid: parts[4]))
    case ("POST", 2) where parts[1] == "tokens":
      mintToken(conn, body: body)
    case (_, 2), (_, 3), (_, 5):
      respond(conn, status: 405, body: [])
    default:
      respond(conn, status: 404, body: Array("not found".utf8))
    }
  }

  /// `POST /v1/tokens {sub, name?, avatar?, sessions?, role?, ttl?}` → `{token}`;
  /// 401 in dev mode (there is no secret to sign with).
  private func mintToken(_ conn: ServerConnection, body: [UInt8]) {
    guard let secret = config.secret else { return respond(conn, status: 401, body: []) }
    guard let request = try? JSONParser.parse(body).objectValue,
      let sub = request["sub"]?.stringValue, !sub.isEmpty
    else { return respondError(conn, 400, "bad_request", "expected {\"sub\": string, ...}") }
    var sessions: [String]?
    if let list = request["sessions"] {
      guard let items = list.arrayValue?.compactMap(\.stringValue), items.count == list.arrayValue?.count else {
        return respondError(conn, 400, "bad_request", "sessions must be an array of strings")
      }
      sessions = items
    }
    var role: Role?
    if let r = request["role"] {
      guard let s = r.stringValue, let parsed = Role(rawValue: s) else {
        return respondError(conn, 400, "bad_request", "role must be host or participant")
      }
      role = parsed
    }
    var ttl = Tokens.defaultTTLMs
    if let value = request["ttl"] {
      guard let valid = Tokens.validTTL(value) else { return respondError(conn, 400, "bad_request", Tokens.ttlRule) }
      ttl = valid
    }
    let token = Tokens.mint(
      secret: secret, sub: sub, name: request["name"]?.stringValue, avatar: request["avatar"]?.stringValue,
      sessions: sessions, role: role, ttlMs: ttl, nowWallMs: now.wallMs)
    respondJSON(conn, status: 200, object([("token", .string(token))]))
  }

  func respondError(_ conn: ServerConnection, _ status: Int, _ code: String, _ message: String) {
    respondJSON(conn, status: status, object([("error", .string(code)), ("message", .string(message))]))
  }

  func object(_ members: [(String, JSONValue)]) -> [UInt8] {
    JSONValue.object(JSONObject(members.map { (key: $0.0, value: $0.1) })).encoded()
  }

  /// Mirrors the core's counters into the Prometheus registry right before a scrape.
  func refreshCoreMetrics() {
    let s = core.stats
    metrics.advance(metrics.bytesIn, key: "in", to: loop.stats.bytesRead)
    metrics.advance(metrics.bytesOut, key: "out", to: loop.stats.bytesWritten)
    metrics.mirror("relay_core_connections", s.connections)
    metrics.mirror("relay_sessions", s.sessions)
    metrics.mirror("relay_participants", s.participants)
    metrics.mirrorCounter("relay_fanout_deliveries_total", s.deliveries)
    metrics.mirrorCounter("relay_participants_lost_total", s.lost)
    metrics.mirrorCounter("relay_participants_restored_total", s.restored)
    metrics.mirrorCounter("relay_participants_timed_out_total", s.timedOut)
    metrics.mirror("relay_replay_bytes", s.replayBytes)
    metrics.mirror("relay_replay_budget_bytes", config.core.replayBudgetBytes)
    metrics.mirrorCounter("relay_replay_evicted_total", s.replayEvictions)
    for (k, v) in s.commandsByType.sorted(by: { $0.key < $1.key }) {
      metrics.mirrorCounter("relay_commands_total", labels: [("type", k)], v)
    }
    for (k, v) in s.eventsByType.sorted(by: { $0.key < $1.key }) {
      metrics.mirrorCounter("relay_events_total", labels: [("type", k)], v)
    }
    for (k, v) in s.errorsByCode.sorted(by: { $0.key < $1.key }) {
      metrics.mirrorCounter("relay_errors_total", labels: [("code", k)], v)
    }
    refreshCallMetrics()
    refreshPushMetrics()
    refreshTurnMetrics()
    refreshLogMetrics()
    refreshTLSMetrics()
    refreshOutboundMetrics()
  }
}
