// HTTPClient's bounds: every request bounded in time, the in-flight set in count and
// bytes, responses in size; close() cancels; no handle or transfer outlives its use.
import EventLoop
import OutboundHTTP
import Testing

@testable import OutboundHTTP

@Suite struct HTTPClientBoundsTests {
  @Test func blackHoledServerTimesOutWithinTheBound() throws {
    let server = try TestServer("blackhole")
    defer { server.stop() }
    let run = try ClientRun()
    let start = run.loop.nowMs
    var result: HTTPResult?
    var tookMs: UInt64 = 0
    run.client.send(HTTPRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/", body: [1], timeoutMs: 300)) {
      result = $0
      tookMs = run.elapsedMs(since: start)
      run.client.close()
    }
    run.run()
    #expect(result?.failureKind == .timeout)
    #expect(tookMs >= 250 && tookMs < 3_000, "took \(tookMs) ms")
  }

  @Test func refusedConnectionFails() throws {
    // A port nothing listens on: take one from a server, then stop it.
    let server = try TestServer("http1")
    server.stop()
    let run = try ClientRun()
    var result: HTTPResult?
    run.client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)/")) {
      result = $0
      run.client.close()
    }
    run.run()
    #expect(result?.failureKind == .refused)
  }

  @Test func inFlightBoundsRefuseInCountAndBytes() throws {
    let server = try TestServer("blackhole")
    defer { server.stop() }
    let run = try ClientRun(HTTPClientSettings(maxInFlight: 2, maxInFlightBytes: 100))
    let url = "http://127.0.0.1:\(server.port)/"
    var cancelled = 0
    let count = { (r: HTTPResult) in if r.failureKind == .cancelled { cancelled += 1 } }
    #expect(run.client.send(HTTPRequest(method: "POST", url: url, body: [UInt8](repeating: 1, count: 60)), completion: count))
    // 60 + 41 bytes would pass the byte bound; 40 fits.
    #expect(!run.client.send(HTTPRequest(method: "POST", url: url, body: [UInt8](repeating: 1, count: 41)), completion: count))
    #expect(run.client.send(HTTPRequest(method: "POST", url: url, body: [UInt8](repeating: 1, count: 40)), completion: count))
    #expect(run.client.inFlight == 2 && run.client.inFlightBytes == 100)
    #expect(!run.client.send(HTTPRequest(method: "GET", url: url), completion: count))
    run.client.close()
    #expect(cancelled == 2)
    #expect(!run.client.send(HTTPRequest(method: "GET", url: url), completion: count))
    run.run()
  }

  @Test func closeCancelsRequestsInFlight() throws {
    let server = try TestServer("blackhole")
    defer { server.stop() }
    let run = try ClientRun()
    var results: [HTTPResult] = []
    for _ in 0..<3 {
      run.client.send(HTTPRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/", body: [1])) {
        results.append($0)
      }
    }
    // Close once the requests are on the wire (the server holds them unanswered).
    let later = EventLoop.Timer(loop: run.loop)
    later.start(afterMs: 200) {
      later.close()
      run.client.close()
    }
    run.run()
    #expect(results.count == 3)
    #expect(results.allSatisfy { $0.failureKind == .cancelled })
    #expect(run.client.tally.live == 0)
  }

  @Test func oversizedResponsesFailTooLarge() throws {
    let server = try TestServer("http1")
    defer { server.stop() }
    let run = try ClientRun(HTTPClientSettings(maxResponseBytes: 1_000))
    var results: [String: HTTPResult] = [:]
    // /big declares its length (refused from the header); /stream does not (refused
    // by the write callback); /big/1000 fits exactly.
    for path in ["/big/5000", "/stream/5000", "/big/1000"] {
      run.client.send(HTTPRequest(method: "GET", url: "http://127.0.0.1:\(server.port)\(path)")) {
        results[path] = $0
        if results.count == 3 { run.client.close() }
      }
    }
    run.run()
    #expect(results["/big/5000"]?.failureKind == .tooLarge)
    #expect(results["/stream/5000"]?.failureKind == .tooLarge)
    #expect(results["/big/1000"]?.body.count == 1_000)
  }

  @Test func manyRequestsLeaveNoTransferOrHandleBehind() throws {
    let server = try TestServer("http1")
    defer { server.stop() }
    let run = try ClientRun(HTTPClientSettings(maxInFlight: 16), timeoutMs: 30_000)
    var done = 0
    var statuses: [Int: Int] = [:]
    func more() {
      while done + run.client.inFlight < 600, run.client.send(
        HTTPRequest(method: "POST", url: "http://127.0.0.1:\(server.port)/x", body: [UInt8](repeating: 2, count: 100)),
        completion: { result in
          done += 1
          statuses[result.status ?? -1, default: 0] += 1
          if done == 600 { run.client.close() } else { more() }
        })
      {}
    }
    more()
    run.run()
    #expect(statuses == [200: 600])
    #expect(run.client.tally.live == 0)
  }

  @Test func completionsNeverRunInsideSend() throws {
    let server = try TestServer("http1")
    defer { server.stop() }
    let run = try ClientRun()
    var returned = 0
    var results: [HTTPResult] = []
    // A scheme libcurl refuses (only http and https are allowed), requests that
    // cannot even be set up (a NUL in the URL, a method that would inject a header
    // line), and an ordinary one.
    let base = "http://127.0.0.1:\(server.port)"
    let cases = [("GET", "ftp://127.0.0.1:\(server.port)/x"), ("GET", "\(base)/a\u{0}b"), ("GET\r\nX-A: 1", base), ("GET", base)]
    for (method, url) in cases {
      let before = returned
      let accepted = run.client.send(HTTPRequest(method: method, url: url)) { result in
        #expect(returned > before, "completion ran inside send")
        results.append(result)
        if results.count == 4 { run.client.close() }
      }
      #expect(accepted)
      returned += 1
    }
    run.run()
    #expect(results.count == 4)
    #expect(results.filter { $0.failureKind != nil }.count == 3)
  }

  @Test func resolveFailureIsReported() throws {
    let run = try ClientRun()
    var result: HTTPResult?
    run.client.send(HTTPRequest(method: "GET", url: "http://no-such-host.invalid/")) {
      result = $0
      run.client.close()
    }
    run.run()
    #expect(result?.failureKind == .resolve)
  }
}
