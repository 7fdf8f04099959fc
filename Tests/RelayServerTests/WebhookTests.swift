// The webhook client's pure parts (contract §11): URL parsing, request format and
// signature, status-line parsing, backoff bounds. Delivery itself is exercised over
// real sockets by Tests/integration/test_webhook.py.
import EventLoop
import Logging
import Testing

@testable import RelayServer

@Suite struct WebhookTests {
  @Test func parsesHTTPURLs() {
    #expect(
      WebhookEndpoint.parse("http://127.0.0.1:9000/hooks/relay")
        == WebhookEndpoint(host: "127.0.0.1", port: 9000, path: "/hooks/relay", authority: "127.0.0.1:9000"))
    #expect(WebhookEndpoint.parse("http://localhost/x")?.host == "127.0.0.1")
    #expect(WebhookEndpoint.parse("http://localhost/x")?.port == 80)
    #expect(WebhookEndpoint.parse("http://[::1]:81")?.host == "::1")
    #expect(WebhookEndpoint.parse("http://[::1]:81")?.path == "/")
    #expect(WebhookEndpoint.parse("https://example.com/x") == nil)
    #expect(WebhookEndpoint.parse("http://host:0/x") == nil)
    #expect(WebhookEndpoint.parse("http://host:99999/x") == nil)
    #expect(WebhookEndpoint.parse("http://:80/x") == nil)
  }

  @Test func requestIsSignedOverTheExactBody() {
    let endpoint = WebhookEndpoint.parse("http://127.0.0.1:9000/h")!
    let body = Array("The quick brown fox jumps over the lazy dog".utf8)
    let bytes = WebhookAttempt.request(endpoint: endpoint, event: "call.offline", body: body, secret: Array("key".utf8), attempt: 2)
    let text = String(decoding: bytes, as: UTF8.self)
    #expect(text.hasPrefix("POST /h HTTP/1.1\r\nHost: 127.0.0.1:9000\r\n"))
    #expect(text.contains("\r\nContent-Type: application/json\r\n"))
    #expect(text.contains("\r\nContent-Length: \(body.count)\r\n"))
    #expect(text.contains("\r\nX-Relay-Event: call.offline\r\n"))
    // RFC 4231-style known answer: HMAC-SHA256("key", "The quick brown fox…").
    #expect(text.contains("\r\nX-Relay-Signature: sha256=f7bc83f430538424b13298e6aa6fb143ef4d59a14946175997479dbc2d1a3cd8\r\n"))
    #expect(text.hasSuffix("\r\n\r\nThe quick brown fox jumps over the lazy dog"))
  }

  @Test func statusLineParsing() {
    #expect(WebhookAttempt.statusCode(Array("HTTP/1.1 204 No Content\r\n".utf8)) == 204)
    #expect(WebhookAttempt.statusCode(Array("HTTP/1.0 500\r\n".utf8)) == 500)
    #expect(WebhookAttempt.statusCode(Array("HTTP/1.1 200 OK".utf8)) == nil)  // line not complete
    #expect(WebhookAttempt.statusCode(Array("garbage\r\n".utf8)) == nil)
    #expect(WebhookAttempt.statusCode(Array("HTTP/1.1 2000 x\r\n".utf8)) == nil)
  }

  @Test func backoffGrowsIsCappedAndJittered() {
    let loop = Loop()
    defer { loop.close() }
    let client = WebhookClient(
      loop: loop, endpoint: WebhookEndpoint.parse("http://127.0.0.1:1/")!, secret: "s", settings: WebhookSettings(),
      metrics: ServerMetrics(), logger: Logger(label: "test"))
    for (attempt, base) in [(1, UInt64(200)), (2, 400), (3, 800), (10, 5_000), (60, 5_000)] {
      for _ in 0..<20 {
        let ms = client.backoffMs(afterAttempt: attempt)
        #expect(ms >= base && ms <= base + base / 2, "attempt \(attempt): \(ms)")
      }
    }
  }
}
