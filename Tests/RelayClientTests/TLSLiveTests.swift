// RelayClient over wss:// against a relay serving TLS (`--tls-cert`): the Linux
// transport verifies the relay's certificate against the trust store OpenSSL reads
// (`SSL_CERT_FILE` here, the test's self-signed certificate).

import Foundation
import Testing
import TestSupport

#if canImport(Glibc)
  import Glibc
#endif

@testable import RelayClient

@Suite(.serialized) struct TLSLiveTests {
  @Test("wss://: connect, join, a message round trip")
  func secureWebSocket() async throws {
    let pair = try TestCertificate.make("ec")
    let (cert, key) = (pair.cert, pair.key)
    setenv("SSL_CERT_FILE", cert, 1)
    let relay = try RelayProcess(["--tls-cert", cert, "--tls-key", key], tls: true)
    #expect(relay.url.scheme == "wss")
    let (alice, ra) = makeClient(relay, dev("alice"))
    try await alice.connect()
    try await alice.joinSession(sessionID: "secure")
    _ = try await alice.sendMessage(.object(JSONObject([("n", .number(JSONNumber(7)))])), sessionID: "secure")
    await ra.wait(for: "message secure alice 7")
    alice.disconnect()
    relay.stop()
  }
}
