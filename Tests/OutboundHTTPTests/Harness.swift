// What the OutboundHTTP tests share: the Python test server (Fixtures/http_server.py)
// as a subprocess, and a loop run bounded by a watchdog.
import EventLoop
import Foundation
import OutboundHTTP
import TestSupport
import Testing

/// Fixtures/http_server.py in MODE on 127.0.0.1; stopped by `stop()` (its stdin closes).
final class TestServer {
  let port: Int
  private let process = Process()
  private let stdin = Pipe()

  init(_ mode: String, certificate: TestCertificate? = nil) throws {
    let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .appendingPathComponent("Fixtures/http_server.py").path
    let stdout = Pipe()
    process.executableURL = URL(fileURLWithPath: "/usr/bin/env")
    process.arguments = ["python3", script, mode] + (certificate.map { [$0.cert, $0.key] } ?? [])
    process.standardInput = stdin
    process.standardOutput = stdout
    try process.run()
    var line: [UInt8] = []
    // The port line arrives once the server listens; bounded by the read ending.
    while let byte = try stdout.fileHandleForReading.read(upToCount: 1)?.first, byte != UInt8(ascii: "\n") {
      line.append(byte)
    }
    guard let port = Int(String(decoding: line, as: UTF8.self)) else {
      process.terminate()
      throw ServerDidNotStart()
    }
    self.port = port
  }

  struct ServerDidNotStart: Error {}

  func stop() {
    try? stdin.fileHandleForWriting.close()
    process.waitUntilExit()
  }
}

/// One loop and one client; `run()` returns once the test closed the client (all
/// handles closed) or the watchdog fired, then checks that nothing leaked.
final class ClientRun {
  let loop = Loop()
  let client: HTTPClient
  private let watchdog: EventLoop.Timer
  private var timedOut = false

  init(_ settings: HTTPClientSettings = HTTPClientSettings(), timeoutMs: UInt64 = 10_000) throws {
    client = try HTTPClient(loop: loop, settings: settings)
    watchdog = EventLoop.Timer(loop: loop)
    watchdog.unref()
    watchdog.start(afterMs: timeoutMs) { [unowned self] in
      self.timedOut = true
      self.client.close()
      self.loop.stop()
    }
  }

  func run(sourceLocation: SourceLocation = #_sourceLocation) {
    loop.run()
    #expect(!timedOut, "watchdog fired", sourceLocation: sourceLocation)
    #expect(client.inFlight == 0 && client.inFlightBytes == 0, sourceLocation: sourceLocation)
    watchdog.close()
    loop.close()
  }

  /// Milliseconds on the loop's clock since `start`.
  func elapsedMs(since start: UInt64) -> UInt64 {
    loop.updateTime()
    return loop.nowMs - start
  }
}

extension HTTPResult {
  var status: Int? {
    if case .response(let status, _, _) = self { return status }
    return nil
  }

  var failureKind: HTTPFailure.Kind? {
    if case .failure(let failure) = self { return failure.kind }
    return nil
  }

  var body: [UInt8] {
    if case .response(_, _, let body) = self { return body }
    return []
  }

  /// The first header of that name (case-insensitive).
  func header(_ name: String) -> String? {
    guard case .response(_, let headers, _) = self else { return nil }
    return headers.first { $0.0.lowercased() == name.lowercased() }?.1
  }
}
