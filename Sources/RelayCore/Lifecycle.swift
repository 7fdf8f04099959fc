// Connection endings and deadlines (§1 hello timeout, §5 left); lost connections and
// grace are in Liveness.swift.
import RelayProtocol
import RelayPrimitives

extension RelayCore {
  /// A clean end (close handshake, or the core's own close): in each of the
  /// connection's sessions, `participant.left {reason: "left"}` at once (§5).
  func detachLeaving(_ connection: Connection, at: Instant) {
    guard let uid = connection.uid else { return }
    for id in connection.sessions {
      removeParticipant(uid, from: id, reason: .left, by: uid, at: at)
    }
    connection.sessions.removeAll()
    snapshotTouch(connection)
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
