// `HTTPClient.checkURL`: what the relay refuses at start (exit 64, contract §11).
import OutboundHTTP
import Testing

@Suite struct CheckURLTests {
  @Test func usableURLs() {
    #expect(HTTPClient.checkURL("http://127.0.0.1:9000/hooks") == nil)
    #expect(HTTPClient.checkURL("https://hooks.example.com/relay") == nil)
    #expect(HTTPClient.checkURL("HTTPS://localhost:8443") == nil)
    #expect(HTTPClient.checkURL("http://[::1]:81/x") == nil)
  }

  @Test func unusableURLs() {
    #expect(HTTPClient.checkURL("ftp://example.com/x") != nil)
    #expect(HTTPClient.checkURL("example.com/x") != nil)
    #expect(HTTPClient.checkURL("http://") != nil)
    #expect(HTTPClient.checkURL("http://exa mple.com/") != nil)
    #expect(HTTPClient.checkURL("") != nil)
    #expect(HTTPClient.checkURL("http://host:99999/") != nil)
  }
}
