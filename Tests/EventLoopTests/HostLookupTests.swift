import EventLoop
import Testing

/// `HostResolver.resolve(_:on:_:)`: names through `uv_getaddrinfo` off the loop
/// thread, literals at once; every request's memory released (the fixture's
/// `uv_loop_close` check fails on a leaked request).
@Suite("Asynchronous host lookup")
struct HostLookupTests {
  @Test("IP literals are answered before resolve returns, without a lookup")
  func literals() {
    let fixture = LoopFixture()
    for literal in ["10.1.2.3", "::1", "0.0.0.0", "fe80::1"] {
      var answer: Result<String, LoopError>?
      HostResolver.resolve(literal, on: fixture.loop) { answer = $0 }
      #expect(answer == .success(literal))
    }
    fixture.runAndClose()
  }

  @Test("localhost resolves on a loop callback; an unknown name fails cleanly")
  func names() {
    let fixture = LoopFixture(timeoutMs: 20_000)
    var answers: [String: Result<String, LoopError>] = [:]
    for name in ["localhost", "no-such-host.invalid"] {
      HostResolver.resolve(name, on: fixture.loop) { answers[name] = $0 }
    }
    // Both are pending: the lookups run on libuv's thread pool, not in this call.
    #expect(answers.isEmpty)
    fixture.runAndClose()
    guard case .success(let localhost)? = answers["localhost"] else {
      Issue.record("localhost: \(String(describing: answers["localhost"]))")
      return
    }
    #expect(localhost == "127.0.0.1" || localhost == "::1")
    guard case .failure(let error)? = answers["no-such-host.invalid"] else {
      Issue.record("the .invalid name resolved: \(String(describing: answers["no-such-host.invalid"]))")
      return
    }
    #expect(error.name.hasPrefix("EAI_"), "\(error)")
  }
}
