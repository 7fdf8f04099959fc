// §6 join/leave rate: a join costs the relay a snapshot of O(members) bytes and a
// leave/join pair an event to every member, both for a few bytes of input, so one
// connection may make at most `joinRate` of them in any `joinWindowMs` (sliding, like
// the §7 hand rate). A refused command is answered `rate_limited` and changes nothing.

extension RelayCore {
  /// Takes one join/leave from the connection's window, or refuses it.
  func acquireJoinRate(_ request: Request) throws(Refusal) {
    let c = request.c
    var window = joinRates[c] ?? RateWindow(limit: config.joinRate, windowMs: config.joinWindowMs)
    let granted = window.tryAcquire(at: request.at.monoMs)
    joinRates[c] = window
    guard granted else {
      throw Refusal(.rateLimited, "at most \(config.joinRate) joins and leaves per \(config.joinWindowMs) ms")
    }
  }
}
