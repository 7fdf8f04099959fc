// What makes a request cheap without changing what it does: easy handles reused
// between requests (reset in between) and response headers kept only when named.
import OutboundHTTP
import TestSupport
import Testing

@testable import OutboundHTTP

extension LiveHTTPTests {
  @Suite struct HTTPClientReuseTests {
    @Test func aReusedHandleCarriesNothingOfTheRequestBefore() throws {
      let server = try TestServer("http1")
      defer { server.stop() }
      let run = try ClientRun()
      var results: [HTTPResult] = []
      var sparesAtFirstAnswer = -1
      let post = HTTPRequest(
        method: "PUT", url: "http://127.0.0.1:\(server.port)/a", headers: [("X-First", "1")], body: [1, 2, 3])
      run.client.send(post) { result in
        results.append(result)
        sparesAtFirstAnswer = run.client.spareHandleCount
        run.client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/status/204")) {
          results.append($0)
          run.client.close()
        }
      }
      run.run()
      // The first request's handle was kept, and the second took it.
      #expect(sparesAtFirstAnswer == 1)
      #expect(results.count == 2)
      #expect(results.first?.header("x-method") == "PUT" && results.first?.body == [1, 2, 3])
      #expect(results.last?.status == 204)
      #expect(results.last?.header("x-method") == "GET")
      #expect(results.last?.header("x-echo-x-first") == nil)
      #expect(results.last?.body == [])
      #expect(run.client.tally.live == 0)
    }

    @Test func onlyTheNamedResponseHeadersAreKept() throws {
      let server = try TestServer("http1")
      defer { server.stop() }
      let request = HTTPRequest(
        method: "POST", url: "http://127.0.0.1:\(server.port)/status/503", headers: [("X-Retry", "1")], body: [9],
        responseHeaders: .only(["x-method", "x-echo-x-retry"]))
      let result = try ClientRun().single(request)
      #expect(result?.status == 503)
      #expect(result?.body == [9])
      guard case .response(_, let headers, _) = result else { return }
      #expect(headers.map { $0.0.lowercased() }.sorted() == ["x-echo-x-retry", "x-method"])
      #expect(result?.header("x-method") == "POST")
    }
  }
}
