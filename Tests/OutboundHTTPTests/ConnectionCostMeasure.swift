// Figures, not a timed test (runs only with OUTBOUND_HTTP_MEASURE=1): what a new
// outbound connection costs the loop, plain and TLS, with 50 requests each on a new
// connection (the server closes after answering). Results: Benchmarks/results/outbound-http.md.
import EventLoop
import Foundation
import OutboundHTTP
import TestSupport
import Testing

@Suite(.serialized, .enabled(if: ProcessInfo.processInfo.environment["OUTBOUND_HTTP_MEASURE"] == "1"))
struct ConnectionCostMeasure {
  @Test(arguments: ["http", "https+caFile"]) func newConnections(kind: String) throws {
    let cert = try TestCertificate.make()
    let tls = kind != "http"
    let server = try TestServer(tls ? "https1" : "http1", certificate: cert)
    defer { server.stop() }
    let run = try ClientRun(HTTPClientSettings(caFile: tls ? cert.cert : nil), timeoutMs: 60_000)
    var turns: [Double] = []
    run.loop.onTurn = { ns, _ in turns.append(Double(ns) / 1e6) }
    var done = 0
    let start = Loop.hrtimeNs()
    func next() {
      run.client.send(HTTPRequest(method: "GET", url: "\(tls ? "https" : "http")://localhost:\(server.port)/close")) { r in
        #expect(r.status == 200)
        done += 1
        if done < 50 { next() } else { run.client.close() }
      }
    }
    next()
    run.run()
    let perRequest = Double(Loop.hrtimeNs() - start) / 1e6 / 50
    let later = turns.dropFirst(turns.firstIndex { $0 > 1 }.map { $0 + 1 } ?? 0).sorted()
    print(
      "MEASURE \(kind): \(String(format: "%.2f", perRequest)) ms per request on a new connection; "
        + "longest turn \(String(format: "%.1f", turns.max() ?? 0)) ms; after it: p50 "
        + "\(String(format: "%.2f", later.isEmpty ? 0 : later[later.count / 2])) ms, max \(String(format: "%.1f", later.last ?? 0)) ms")
  }
}
