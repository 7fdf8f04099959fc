// RelayClient over wss:// against a relay serving TLS (`--tls-cert`): the Linux
// transport verifies the relay's certificate against the trust store OpenSSL reads
// (`SSL_CERT_FILE` here, the test's self-signed certificate).

import Foundation
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@testable import RelayClient

@Suite(.serialized) struct TLSLiveTests {
  @Test("wss://: connect, join, a message round trip")
  func secureWebSocket() async throws {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-sdk-tls-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let cert = dir.appendingPathComponent("cert.pem").path
    let key = dir.appendingPathComponent("key.pem").path
    let openssl = Process()
    openssl.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    openssl.arguments = ["req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=localhost", "-newkey", "ec",
                         "-pkeyopt", "ec_paramgen_curve:P-256", "-keyout", key, "-out", cert,
                         "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"]
    openssl.standardError = FileHandle.nullDevice
    try openssl.run()
    openssl.waitUntilExit()
    #expect(openssl.terminationStatus == 0)
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
