// Certificates for the TLS tests, made by the `openssl` command into a temporary
// folder as an operator would make them (docs/tls.md).
import Foundation

/// A self-signed certificate and key for 127.0.0.1 / localhost, made once per kind
/// ("ec": P-256, "rsa": RSA 2048) and process.
public struct TestCertificate: Sendable {
  public let cert: String
  public let key: String

  /// Tests run in parallel: one generation per kind, the others wait for it.
  private static let lock = NSLock()
  nonisolated(unsafe) private static var made: [String: TestCertificate] = [:]

  public static func make(_ kind: String = "ec") throws -> TestCertificate {
    lock.lock()
    defer { lock.unlock() }
    if let pair = made[kind] { return pair }
    let pair = try generate(kind)
    made[kind] = pair
    return pair
  }

  public struct GenerationFailed: Error {}

  private static func generate(_ kind: String) throws -> TestCertificate {
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relay-tls-\(kind)-\(getpid())")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    let cert = dir.appendingPathComponent("cert.pem").path
    let key = dir.appendingPathComponent("key.pem").path
    let keyArgs = kind == "rsa" ? ["-newkey", "rsa:2048"] : ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    let p = Process()
    p.executableURL = URL(fileURLWithPath: "/usr/bin/openssl")
    p.arguments = ["req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", key, "-out", cert,
                   "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"] + keyArgs
    p.standardOutput = FileHandle.nullDevice
    p.standardError = FileHandle.nullDevice
    try p.run()
    p.waitUntilExit()
    guard p.terminationStatus == 0 else { throw GenerationFailed() }
    return TestCertificate(cert: cert, key: key)
  }
}
