// One test at a time through FoundationNetworking. On Linux, URLSession does HTTP and
// WebSockets through libcurl; while HTTP data tasks of the push tests ran, the
// WebSocket task of URLSessionLiveTests was seen to neither open nor fail for a
// minute. The tests that use URLSession for real take this gate, so the suites
// (which Swift Testing runs in parallel) do not overlap there.

/// A process-wide async mutex for the tests that drive URLSession against a relay.
actor FoundationNetworkingGate {
  static let shared = FoundationNetworkingGate()
  private var busy = false
  private var waiting: [CheckedContinuation<Void, Never>] = []

  /// Runs `body` once no other holder is inside.
  static func exclusive<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
    await shared.enter()
    do {
      let value = try await body()
      await shared.leave()
      return value
    } catch {
      await shared.leave()
      throw error
    }
  }

  private func enter() async {
    guard busy else {
      busy = true
      return
    }
    await withCheckedContinuation { waiting.append($0) }
  }

  private func leave() {
    if waiting.isEmpty {
      busy = false
    } else {
      waiting.removeFirst().resume()  // ownership passes straight to the next waiter
    }
  }
}
