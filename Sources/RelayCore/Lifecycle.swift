// Connection endings and deadlines (§1 hello timeout, §5 lost/left). Heartbeats and
// grace (§5) build on the hooks here.
import RelayProtocol

extension RelayCore {
  /// A clean end (close handshake, or the core's own close): in each of the
  /// connection's sessions, `participant.left {reason: "left"}` at once (§5).
  func detachLeaving(_ connection: Connection, at: Instant) {
    guard let uid = connection.uid else { return }
    for id in connection.sessions {
      removeParticipant(uid, from: id, reason: .left, by: uid, at: at)
    }
    connection.sessions.removeAll()
  }

  /// A transport that ended without a close handshake (§5: the connection is lost;
  /// participants stay `lost` for grace, see Liveness.swift).
  func connectionLost(_ connection: Connection, at: Instant) {
    markLost(connection, at: at)
  }

  /// §5 grace over for `uid` (its participants already timed out and removed by
  /// `graceOver`), and no other live connection: §9 ends its accepted calls and
  /// cancels the calls it rings as caller.
  func userTimedOut(_ uid: String, at: Instant) {
    callsUserTimedOut(uid, at: at)
  }

  // MARK: Deadlines

  /// Whether a queued deadline still matters (lazy cancellation, see DeadlineKind).
  func isWanted(_ kind: DeadlineKind) -> Bool {
    switch kind {
    case .hello(let c): return connections[c]?.phase == .awaitingHello
    case .liveness(let deadline): return isLivenessWanted(deadline)
    case .call(let deadline): return isCallDeadlineWanted(deadline)
    }
  }

  func fire(_ kind: DeadlineKind, at: Instant) {
    guard isWanted(kind) else { return }
    switch kind {
    case .hello(let c):
      // §1: no `hello` within helloTimeoutMs of the upgrade → close 4501.
      guard let connection = connections[c] else { return }
      close(connection, code: CloseCode.unauthorized, reason: "no hello in time", at: at)
    case .liveness(let deadline):
      fireLiveness(deadline, at: at)
    case .call(let deadline):
      fireCallDeadline(deadline, at: at)
    }
  }
}
