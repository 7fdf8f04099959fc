// §6 join/leave rate: a join costs the relay a snapshot of O(members) bytes and a
// leave/join pair an event to every member, both for a few bytes of input, so one
// connection may make at most `joinRate` of them in any `joinWindowMs` (sliding, like
// the §7 hand rate). A refused command is answered `rate_limited` and changes nothing.
// The window lives in the connection's own object and ends with it.
import RelayProtocol

extension RelayCore {
  /// Takes one join/leave from the connection's window, or refuses it.
  func acquireJoinRate(_ request: Request) throws(Refusal) {
    let granted = request.connection.joinWindow.tryAcquire(
      at: request.at.monoMs, lateMs: request.at.lateMs, limit: config.joinRate, windowMs: config.joinWindowMs)
    guard granted else {
      throw Refusal(.rateLimited, "at most \(config.joinRate) joins and leaves per \(config.joinWindowMs) ms")
    }
  }
}

// §5.2 session join rate: the per-connection rate does not bound what many connections
// together do to one session, and every join or leave there is an event to every
// member (a join also a snapshot to the joiner). So a session takes at most
// `sessionJoinRate` joins and leaves in any `sessionJoinWindowMs`, from all
// connections together. Joins past it are refused `rate_limited` (members keep their
// connections); leaves are never refused but count, so the events caused stay
// within about twice the budget. Count-based on the input's instants: deterministic.
extension RelayCore {
  /// Refuses a join that would add a participant to `session` past its budget.
  func checkSessionJoinRate(_ session: Session, _ request: Request) throws(Refusal) {
    guard config.sessionJoinRate > 0 else { return }
    guard session.churnWindow.allows(
      at: request.at.monoMs, limit: config.sessionJoinRate, windowMs: config.sessionJoinWindowMs)
    else {
      throw Refusal(
        .rateLimited,
        "session \(session.id) takes at most \(config.sessionJoinRate) joins and leaves per \(config.sessionJoinWindowMs) ms")
    }
  }

  /// Counts a join or leave against the session's budget (a full window stays full).
  func countSessionChurn(_ session: Session, at: Instant) {
    guard config.sessionJoinRate > 0 else { return }
    _ = session.churnWindow.tryAcquire(
      at: at.monoMs, limit: config.sessionJoinRate, windowMs: config.sessionJoinWindowMs)
  }
}
