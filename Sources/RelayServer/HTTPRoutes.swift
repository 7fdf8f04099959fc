import EventLoop
import RelayCore
import RelayCrypto
import RelayWebSocket
import RelayPrimitives

extension RelayServer {
  /// Routes a complete non-upgrade HTTP request (contract §10).
  func routeHTTP(_ conn: ServerConnection, _ head: HTTPRequestHead, body: [UInt8]) {
    let parts = head.path.split(separator: "/", omittingEmptySubsequences: true).map(String.init)
    let route = parts.joined(separator: "/")
    switch route {
    case "healthz", "readyz", "metrics":
      guard head.method == "GET" else { return respond(conn, status: 405, headers: [("Allow", "GET")], body: []) }
      routeProbe(conn, route)
    default:
      if parts.first == "demo" {
        routeDemo(conn, head, parts)
      } else if parts.first == "v1", parts.count >= 2, parts[1] == "sessions" || parts[1] == "tokens" {
        guard isAdmin(head) else { return respond(conn, status: 401, body: []) }
        routeAdmin(conn, head.method, parts, body: body)
      } else if parts.first == "v1", parts.count >= 3, parts[1] == "calls" {
        routeCalls(conn, head, parts, body: body)
      } else if parts.first == "v1", parts.count >= 2, parts[1] == "push" {
        routePush(conn, head, parts, body: body)
      } else {
        respond(conn, status: 404, body: Array("not found".utf8))
      }
    }
  }

  private func routeProbe(_ conn: ServerConnection, _ route: String) {
    switch route {
    case "healthz":
      respond(conn, status: 200, headers: [("Content-Type", "text/plain")], body: Array("ok".utf8))
    case "readyz":
      // §10/§12: not ready while draining, or while the cluster bus is down.
      let ready = isReady
      respond(conn, status: ready ? 200 : 503, headers: [("Content-Type", "text/plain")],
              body: Array((ready ? "ready" : draining ? "draining" : stateUnavailable).utf8))
    default:
      refreshCoreMetrics()
      respond(conn, status: 200, headers: [("Content-Type", "text/plain; version=0.0.4")],
              body: metrics.exposition())
    }
  }

  /// Contract §10: without a configured key every admin request gets 401; a wrong
  /// key gets 401 with no detail. The comparison is constant-time.
  func isAdmin(_ head: HTTPRequestHead) -> Bool {
    guard let key = config.adminKey, let token = bearer(head) else { return false }
    return Crypto.constantTimeEqual(Array(token.utf8), Array(key.utf8))
  }

  func bearer(_ head: HTTPRequestHead) -> String? {
    guard let value = head.header("authorization") else { return nil }
    let prefix = "bearer "
    guard value.count > prefix.count, value.lowercased().hasPrefix(prefix) else { return nil }
    return String(value.dropFirst(prefix.count)).trimmingSpaces()
  }
}
