// §6 join/leave rate: a join costs the relay a snapshot of O(members) bytes and a
// leave/join pair an event to every member, both for a few bytes of input, so one
// connection may make at most `joinRate` of them in any `joinWindowMs` (sliding, like
// the §7 hand rate). A refused command is answered `rate_limited` and changes nothing.
// The window lives in the connection's own object and ends with it.

extension RelayCore {
  /// Takes one join/leave from the connection's window, or refuses it.
  func acquireJoinRate(_ request: Request) throws(Refusal) {
    let granted = request.connection.joinWindow.tryAcquire(
      at: request.at.monoMs, limit: config.joinRate, windowMs: config.joinWindowMs)
    guard granted else {
      throw Refusal(.rateLimited, "at most \(config.joinRate) joins and leaves per \(config.joinWindowMs) ms")
    }
  }
}
