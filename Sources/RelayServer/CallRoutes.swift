import EventLoop
import Logging
import OutboundHTTP
import RelayCluster
import RelayCore
import RelayProtocol
import RelayWebSocket

#if canImport(Glibc)
  import Glibc
#endif

extension RelayServer {
  /// The call API (contract §9; protocol/ §11): `GET /v1/calls/{callId}` and
  /// `POST /v1/calls/{callId}/accept|reject|cancel`, for an app woken by a push before
  /// its socket is up. `Authorization: Bearer <user token>` is checked with the same
  /// verifier as `hello.token`; without a valid one → 401. In dev mode there is no
  /// secret, so no token is valid and the API always answers 401 (a dev bearer would
  /// let anyone act for anyone; dev clients use the WebSocket commands).
  func routeCalls(_ conn: ServerConnection, _ head: HTTPRequestHead, _ parts: [String], body: [UInt8]) {
    guard parts.count == 3 || parts.count == 4 else {
      return respond(conn, status: 404, body: Array("not found".utf8))
    }
    guard let token = bearer(head), core.verifyUserToken(token, at: now) != nil else {
      return respond(conn, status: 401, headers: [("WWW-Authenticate", "Bearer")], body: [])
    }
    let callId = parts[2]
    let verb = parts.count == 4 ? parts[3] : nil
    switch (head.method, verb) {
    case ("GET", nil):
      admin(conn, .callInfo(callId: callId, token: token))
    case ("POST", "accept"):
      admin(conn, .call(.accept, callId: callId, token: token))
    case ("POST", "reject"):
      guard let reason = rejectReason(body) else {
        return respondCallError(conn, 400, "bad_request", "body must be {\"reason\": \"declined\"|\"busy\"} or empty")
      }
      admin(conn, .call(.reject(reason), callId: callId, token: token))
    case ("POST", "cancel"):
      admin(conn, .call(.cancel, callId: callId, token: token))
    case (_, nil), (_, "accept"?), (_, "reject"?), (_, "cancel"?):
      respond(conn, status: 405, headers: [("Allow", verb == nil ? "GET" : "POST")], body: [])
    default:
      respond(conn, status: 404, body: Array("not found".utf8))
    }
  }

  /// The answer to an admin or call action, once it ran on the core (standalone) or
  /// was applied from the log (clustered).
  func respondAdmin(_ conn: ServerConnection, _ result: AdminResult) {
    switch result {
    case .sessionCreated(let id):
      respondJSON(conn, status: 200, object([("sessionId", .string(id))]))
    case .participantRemoved(true):
      respondJSON(conn, status: 200, object([("removed", .bool(true))]))
    case .participantRemoved(false):
      respondError(conn, 404, "not_found", "unknown session or participant")
    case .call(let r):
      respondJSON(conn, status: r.status, r.body)
    case .pushDevice(let r):
      if r.status == 204 { respond(conn, status: 204, body: []) } else { respondJSON(conn, status: r.status, r.body) }
    case .pushTokenRemoved:
      respond(conn, status: 204, body: [])
    case .sessionInfo(let info?), .callInfo(let info?):
      respondJSON(conn, status: 200, info)
    case .sessionInfo(nil):
      respondError(conn, 404, "not_found", "unknown session")
    case .callInfo(nil):
      respondCallError(conn, 404, "not_found", "no such call")
    case .unauthorized:
      respond(conn, status: 401, headers: [("WWW-Authenticate", "Bearer")], body: [])
    }
  }

  /// `/reject` takes an optional `{"reason": "declined"|"busy"}` (default declined).
  private func rejectReason(_ body: [UInt8]) -> RejectReason? {
    if body.allSatisfy({ $0 == 0x20 || $0 == 0x0A || $0 == 0x0D || $0 == 0x09 }) { return .declined }
    guard let object = try? JSONParser.parse(body).objectValue else { return nil }
    guard let value = object["reason"], value != .null else { return .declined }
    return value.stringValue.flatMap(RejectReason.init(rawValue:))
  }

  /// Error body of the call API: `{type: "error", code, message}` (protocol/
  /// `schema/http/error.json`), plus `error` for clients that look for it.
  func respondCallError(_ conn: ServerConnection, _ status: Int, _ code: String, _ message: String) {
    respondJSON(
      conn, status: status,
      object([("type", .string("error")), ("code", .string(code)), ("message", .string(message)), ("error", .string(code))]))
  }

  /// Call outcomes and webhook counters for `/metrics` (contract §10 "call outcomes").
  func refreshCallMetrics() {
    let s = core.callStats
    metrics.mirror("relay_calls_initiated", Int(s.initiated))
    metrics.mirror("relay_calls_held", s.held)
    metrics.mirror("relay_calls_finished_held", s.finishedHeld)
    metrics.mirror("relay_calls_finished_bytes", s.finishedBytes)
    metrics.mirror("relay_calls_finished_limit", config.core.maxEndedCalls)
    metrics.mirror("relay_calls_finished_limit_bytes", config.core.maxEndedCallBytes)
    metrics.mirrorCounter("relay_calls_finished_evicted_total", s.finishedEvicted)
    for (k, v) in s.outcomes.sorted(by: { $0.key < $1.key }) {
      metrics.mirror("relay_call_outcomes", labels: [("outcome", k)], Int(v))
    }
    for (k, v) in s.webhooks.sorted(by: { $0.key < $1.key }) {
      metrics.mirror("relay_webhook_events", labels: [("event", k)], Int(v))
    }
    metrics.mirror("relay_webhook_queued", webhookClient?.queued ?? 0)
  }

  // MARK: Webhook wiring

  /// Builds the webhook client from `--webhook-url` / `--webhook-secret` /
  /// `--tls-ca-file` (contract §11). The command line refused settings that cannot
  /// work (exit 64, `outboundSettingsProblem`); the host is resolved per connection,
  /// never here.
  func makeWebhookClient() throws -> WebhookClient? {
    guard let url = config.webhookURL, !url.isEmpty else { return nil }
    if let problem = config.outboundSettingsProblem() { throw HTTPClientError(problem) }
    if config.webhookSecret == nil {
      logger.warning("--webhook-url without --webhook-secret: webhooks are signed with an empty key")
    }
    logger.info("webhook enabled", metadata: ["url": "\(url)"])
    return try WebhookClient(
      loop: loop, url: url, secret: config.webhookSecret ?? "", caFile: config.tlsCAFile, settings: WebhookSettings(),
      metrics: metrics, logger: logger)
  }
}
