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

  /// A transport that ended without a close handshake (§5: the connection is lost).
  /// TODO(heartbeats, §5): mark each of its participants `lost` (connection = nil),
  /// emit `participant.lost {uid}`, count `lost`, and schedule `.grace` at
  /// `graceMs` / `backgroundGraceMs` (per `connection.background`); on expiry call
  /// `userTimedOut`. Until then a lost connection leaves like a clean one.
  func connectionLost(_ connection: Connection, at: Instant) {
    detachLeaving(connection, at: at)
  }

  /// §5 grace over for `uid` in `session`: `hand.lowered {timed_out}` if up, then
  /// `participant.timed_out`, removal — and §9: end its accepted calls, cancel the
  /// calls it rings as caller. TODO(heartbeats/ringing): nothing schedules this yet.
  func userTimedOut(_ uid: String, at: Instant) {}

  /// Drops what only lived for this connection once the shell reports it gone.
  func forget(_ connection: Connection) {
    guard let uid = connection.uid else { return }
    // TODO(resume, §8): keep the token while the user's state is held within grace.
    resumeTokens[connection.resumeToken] = nil
    guard let user = users[uid] else { return }
    user.connections.removeAll { $0 == connection.id }
    if user.connections.isEmpty && user.grantedSessions.isEmpty { users[uid] = nil }
  }

  // MARK: Deadlines

  /// Whether a queued deadline still matters (lazy cancellation, see DeadlineKind).
  func isWanted(_ kind: DeadlineKind) -> Bool {
    switch kind {
    case .hello(let c): return connections[c]?.phase == .awaitingHello
    }
  }

  func fire(_ kind: DeadlineKind, at: Instant) {
    guard isWanted(kind) else { return }
    switch kind {
    case .hello(let c):
      // §1: no `hello` within helloTimeoutMs of the upgrade → close 4501.
      guard let connection = connections[c] else { return }
      close(connection, code: CloseCode.unauthorized, reason: "no hello in time", at: at)
    }
  }
}
