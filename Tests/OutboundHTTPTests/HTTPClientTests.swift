// HTTPClient against a real local server (Fixtures/http_server.py): HTTP/1.1 and
// HTTPS by host name, connection reuse, HTTP/2 multiplexing over ALPN h2 (RFC 7540
// §3.3), and the bounds: time, in-flight count and bytes, response size, close().
import EventLoop
import OutboundHTTP
import TestSupport
import Testing

@testable import OutboundHTTP

@Suite struct HTTPClientTests {
  @Test func plainPostCarriesBodyAndHeaders() throws {
    let server = try TestServer("http1")
    defer { server.stop() }
    let run = try ClientRun()
    var results: [HTTPResult] = []
    let post = HTTPRequest(
      method: "POST", url: "http://127.0.0.1:\(server.port)/hooks", headers: [("X-Relay-Event", "call.offline"), ("X-Bad", "a\r\nX-Injected: 1")],
      body: Array(#"{"a":1}"#.utf8))
    #expect(run.client.send(post) { result in
      results.append(result)
      run.client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/status/503")) {
        results.append($0)
        run.client.close()
      }
    })
    #expect(run.client.inFlight == 1 && run.client.inFlightBytes == 7)
    run.run()
    #expect(results.count == 2)
    #expect(results.first?.status == 200)
    #expect(results.first?.header("x-method") == "POST")
    #expect(results.first?.header("x-echo-x-relay-event") == "call.offline")
    #expect(results.first?.body == Array(#"{"a":1}"#.utf8))
    // A header value with a line break is not sent (it would inject a header).
    #expect(results.first?.header("x-echo-x-bad") == nil && results.first?.header("x-echo-x-injected") == nil)
    #expect(results.last?.status == 503)
    #expect(results.last?.header("x-method") == "GET")
  }

  @Test func httpsByHostNameTrustsTheCAFile() throws {
    let cert = try TestCertificate.make()
    let server = try TestServer("https1", certificate: cert)
    defer { server.stop() }
    let url = "https://localhost:\(server.port)/x"
    let trusted = try ClientRun(HTTPClientSettings(caFile: cert.cert))
    var withCA: HTTPResult?
    trusted.client.send(HTTPRequest(method: "POST", url: url, body: [1, 2, 3])) {
      withCA = $0
      trusted.client.close()
    }
    trusted.run()
    #expect(withCA?.status == 200)
    #expect(withCA?.body == [1, 2, 3])
    // Without the extra root the same server is not trusted: the system roots alone
    // do not vouch for it.
    let untrusted = try ClientRun()
    var withoutCA: HTTPResult?
    untrusted.client.send(HTTPRequest(method: "POST", url: url)) {
      withoutCA = $0
      untrusted.client.close()
    }
    untrusted.run()
    #expect(withoutCA?.failureKind == .tls)
  }

  @Test func anUnusableCAFileIsRefusedAtInit() throws {
    let loop = Loop()
    defer { loop.close() }
    #expect(throws: HTTPClientError.self) {
      _ = try HTTPClient(loop: loop, settings: HTTPClientSettings(caFile: "/nonexistent/ca.pem"))
    }
    let notPEM = try TestCertificate.make().key  // a PEM key, no certificate
    #expect(throws: HTTPClientError.self) {
      _ = try HTTPClient(loop: loop, settings: HTTPClientSettings(caFile: notPEM))
    }
  }

  @Test func keepAliveReusesOneConnection() throws {
    let server = try TestServer("http1")
    defer { server.stop() }
    let run = try ClientRun()
    var seen: [(conn: String?, requests: String?)] = []
    func next() {
      run.client.send(HTTPRequest(method: "POST", url: "http://localhost:\(server.port)/r", body: [7])) { result in
        seen.append((result.header("x-conn"), result.header("x-requests")))
        if seen.count < 4 { next() } else { run.client.close() }
      }
    }
    next()
    run.run()
    #expect(seen.count == 4)
    #expect(Set(seen.map(\.conn)) == ["1"])
    #expect(seen.map(\.requests) == ["1", "2", "3", "4"])
  }

  @Test func http2MultiplexesStreamsOnOneConnection() throws {
    let cert = try TestCertificate.make()
    let server = try TestServer("h2", certificate: cert)
    defer { server.stop() }
    let run = try ClientRun(HTTPClientSettings(caFile: cert.cert))
    var results: [HTTPResult] = []
    for _ in 0..<6 {
      let request = HTTPRequest(
        method: "POST", url: "https://localhost:\(server.port)/slow/300", body: [1], preferHTTP2: true)
      run.client.send(request) { result in
        results.append(result)
        if results.count == 6 { run.client.close() }
      }
    }
    run.run()
    #expect(results.allSatisfy { $0.status == 200 })
    #expect(Set(results.map { $0.header("x-conn") }) == ["1"])
    // Several streams were open at once on that one connection.
    #expect(results.compactMap { Int($0.header("x-concurrent") ?? "") }.max() ?? 0 >= 2)
  }
}
