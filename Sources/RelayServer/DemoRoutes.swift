import RelayWebSocket

extension RelayServer {
  /// `GET /demo` and `GET /demo/<file>`: the demo page and the JavaScript client,
  /// compiled into the binary (DemoAssets.swift) so nothing else needs installing.
  /// Off unless `config.demo` (on by default in dev mode): then every `/demo` path is 404,
  /// like any unknown path (contract §1).
  func routeDemo(_ conn: ServerConnection, _ head: HTTPRequestHead, _ parts: [String]) {
    guard config.demo, parts.count <= 2 else {
      return respond(conn, status: 404, body: Array("not found".utf8))
    }
    guard let asset = DemoAssets.asset(named: parts.count == 1 ? "index.html" : parts[1]) else {
      return respond(conn, status: 404, body: Array("not found".utf8))
    }
    guard head.method == "GET" else {
      return respond(conn, status: 405, headers: [("Allow", "GET")], body: [])
    }
    respond(conn, status: 200, headers: Self.demoHeaders(asset.contentType), body: Array(asset.text.utf8))
  }

  /// The page loads only its own files and talks only to this relay; no caching, so a
  /// rebuilt binary shows its new page at once.
  private static func demoHeaders(_ contentType: String) -> [(String, String)] {
    [
      ("Content-Type", contentType),
      ("Cache-Control", "no-store"),
      ("X-Content-Type-Options", "nosniff"),
      ("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; connect-src 'self' ws: wss:; frame-ancestors 'none'"),
    ]
  }
}
