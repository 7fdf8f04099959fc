import EventLoop
import Testing

/// One loop per test, bounded by an unreferenced watchdog timer: `run()` returns as
/// soon as the test has closed all of its handles, or the watchdog fails the test and
/// stops the loop. `finish()` then closes the loop, which asserts that no handle or
/// request leaked (`uv_loop_close() == 0`, libuv's `MAKE_VALGRIND_HAPPY`).
final class LoopFixture {
  let loop: Loop
  private let watchdog: EventLoop.Timer
  private let timedOut = Flag()

  init(timeoutMs: UInt64 = 5_000, lingerTimeoutMs: UInt64 = 2_000) {
    loop = Loop(lingerTimeoutMs: lingerTimeoutMs)
    watchdog = EventLoop.Timer(loop: loop)
    watchdog.unref()
    let loop = self.loop
    let timedOut = self.timedOut
    watchdog.start(afterMs: timeoutMs) {
      timedOut.isSet = true
      loop.stop()
    }
  }

  /// Runs the loop until the test's handles are closed (or the watchdog fires), then
  /// closes everything and checks for leaks.
  func runAndClose(sourceLocation: SourceLocation = #_sourceLocation) {
    run(sourceLocation: sourceLocation)
    close()
  }

  /// Runs the loop until the test's handles are closed or the watchdog fires.
  func run(sourceLocation: SourceLocation = #_sourceLocation) {
    loop.run()
    #expect(!timedOut.isSet, "watchdog fired: the test did not finish in time", sourceLocation: sourceLocation)
  }

  /// Closes the watchdog and the loop, asserting that nothing leaked.
  func close() {
    watchdog.close()
    loop.close()
  }

  /// Listens on 127.0.0.1 (ephemeral port), connects one client, and calls `body` with
  /// both ends once both are established; the listener is closed by then.
  func connectedPair(
    source: String? = nil, _ body: @escaping (_ server: TCPConnection, _ client: TCPConnection) -> Void
  ) {
    let listener = try! TCPListener(loop: loop, host: "127.0.0.1", port: 0)
    var server: TCPConnection?
    var client: TCPConnection?
    let completeIfReady = {
      guard let server, let client else { return }
      listener.close()
      body(server, client)
    }
    try! listener.listen { accepted in
      server = accepted
      completeIfReady()
    }
    TCPConnector.connect(loop: loop, host: "127.0.0.1", port: listener.port, source: source) { result in
      guard case .success(let connection) = result else {
        Issue.record("connect failed: \(result)")
        return listener.close()
      }
      client = connection
      completeIfReady()
    }
  }
}

/// A mutable flag shared by closures.
final class Flag {
  var isSet = false
}

/// Deterministic test bytes (a simple LCG), so mismatches are reproducible. Filled
/// through a raw buffer: megabytes of `map` are slow in debug builds.
func patternBytes(count: Int, seed: UInt32 = 1) -> [UInt8] {
  [UInt8](unsafeUninitializedCapacity: count) { buffer, initialized in
    var state = seed
    for index in 0..<count {
      state = state &* 1_664_525 &+ 1_013_904_223
      buffer[index] = UInt8(truncatingIfNeeded: state >> 24)
    }
    initialized = count
  }
}

extension CloseReason {
  var isEOF: Bool {
    if case .eof = self { return true }
    return false
  }
  var isLocal: Bool {
    if case .local = self { return true }
    return false
  }
  var error: LoopError? {
    if case .error(let error) = self { return error }
    return nil
  }
}

/// The first index where two byte arrays differ (or the shorter length), nil if equal.
/// Used instead of `#expect(a == b)`, whose failure diff is quadratic on megabytes.
func firstMismatch(_ actual: [UInt8], _ expected: [UInt8]) -> Int? {
  if actual == expected { return nil }
  let common = min(actual.count, expected.count)
  for index in 0..<common where actual[index] != expected[index] { return index }
  return actual.count == expected.count ? nil : common
}
