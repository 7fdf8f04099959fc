// The webhook client's pure parts (contract §11): request format and signature, the
// retry rule per outcome, backoff bounds, the settings refused at start. Delivery
// itself is exercised over real sockets by Tests/integration/test_webhook.py.
import EventLoop
import Logging
import OutboundHTTP
import RelayCore
import Testing

@testable import RelayServer

@Suite struct WebhookTests {
  @Test func requestIsSignedOverTheExactBody() {
    let body = Array("The quick brown fox jumps over the lazy dog".utf8)
    let request = WebhookRequest.make(
      url: "https://hooks.example.com/h", event: "call.offline", body: body, secret: Array("key".utf8), attempt: 2,
      timeoutMs: 5_000)
    let headers = Dictionary(uniqueKeysWithValues: request.headers)
    #expect(request.method == "POST")
    #expect(request.url == "https://hooks.example.com/h")
    #expect(request.body == body)
    #expect(request.timeoutMs == 5_000)
    #expect(headers["Content-Type"] == "application/json")
    #expect(headers["X-Relay-Event"] == "call.offline")
    #expect(headers["X-Relay-Attempt"] == "2")
    // RFC 4231-style known answer: HMAC-SHA256("key", "The quick brown fox…").
    #expect(headers["X-Relay-Signature"] == "sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8")
  }

  @Test func outcomesDecideRetries() {
    func response(_ status: Int) -> HTTPResult { .response(status: status, headers: [], body: []) }
    #expect(WebhookOutcome(response(200)) == .delivered)
    #expect(WebhookOutcome(response(204)) == .delivered)
    #expect(WebhookOutcome(response(400)) == .refused(400))
    #expect(WebhookOutcome(response(404)) == .refused(404))
    #expect(WebhookOutcome(response(408)) == .retry("status 408"))
    #expect(WebhookOutcome(response(429)) == .retry("status 429"))
    #expect(WebhookOutcome(response(503)) == .retry("status 503"))
    #expect(WebhookOutcome(.failure(HTTPFailure(kind: .timeout, message: "t"))) == .retry("timeout: t"))
  }

  @Test func unusableSettingsAreNamed() {
    var config = ServerConfig(core: CoreConfig(devMode: true, serverVersion: "t"))
    #expect(config.outboundSettingsProblem() == nil)
    config.webhookURL = "https://hooks.example.com/relay"
    #expect(config.outboundSettingsProblem() == nil)
    config.webhookURL = "ftp://hooks.example.com/relay"
    #expect(config.outboundSettingsProblem()?.hasPrefix("--webhook-url") == true)
    config.webhookURL = "http://:8080/relay"
    #expect(config.outboundSettingsProblem()?.hasPrefix("--webhook-url") == true)
    config.webhookURL = nil
    config.tlsCAFile = "/nonexistent/ca.pem"
    #expect(config.outboundSettingsProblem()?.hasPrefix("--tls-ca-file") == true)
  }

  @Test func backoffGrowsIsCappedAndJittered() throws {
    let loop = Loop()
    defer { loop.close() }
    let client = try WebhookClient(
      loop: loop, url: "http://127.0.0.1:1/", secret: "s", caFile: nil, settings: WebhookSettings(),
      metrics: ServerMetrics(), logger: Logger(label: "test"))
    defer { client.close() }
    for (attempt, base) in [(1, UInt64(200)), (2, 400), (3, 800), (10, 5_000), (60, 5_000)] {
      for _ in 0..<20 {
        let ms = client.backoffMs(afterAttempt: attempt)
        #expect(ms >= base && ms <= base + base / 2, "attempt \(attempt): \(ms)")
      }
    }
  }
}
