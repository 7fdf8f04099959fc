// §5 idle timeout (protocol/PROTOCOL.md §5.5): a participant that has been the only
// participant of a session — lost participants count as present — for
// `idleTimeoutMs` gets `session.idle_warning` 60 000 ms before the end (at once if the
// timeout is shorter), then `session.timed_out`, and is removed with a recorded
// `participant.left {reason: "idle"}`. Anyone joining cancels the countdown.
import RelayProtocol

extension RelayCore {
  /// §5: the warning comes this long before the end.
  static let idleWarningLeadMs: Int64 = 60_000

  /// Called after every membership change of `session` (join, leave, removal,
  /// timeout). Starts the countdown when exactly one participant is left, cancels it
  /// otherwise; a running countdown is kept while the count stays at one.
  func idleMembershipChanged(_ session: Session, at: Instant) {
    let id = session.id
    guard config.idleTimeoutMs > 0, sessions[id] === session, session.count == 1 else {
      cancelIdle(id)
      return
    }
    guard liveness.idle[id] == nil else { return }
    let generation = liveness.nextIdleGeneration
    liveness.nextIdleGeneration += 1
    let endsAt = at.monoMs + config.idleTimeoutMs
    liveness.idle[id] = IdleCountdown(generation: generation, endsAtMonoMs: endsAt)
    liveness.idleSession[generation] = id
    // "At once" still goes through the queue: the warning must follow the reply and
    // the snapshot of the join that started the countdown (§2: reply first).
    let warnAt = max(at.monoMs, endsAt - Self.idleWarningLeadMs)
    deadlines.schedule(at: warnAt, .liveness(.idleWarning(generation: generation)))
    deadlines.schedule(at: endsAt, .liveness(.idleEnd(generation: generation)))
  }

  private func cancelIdle(_ id: String) {
    guard let countdown = liveness.idle.removeValue(forKey: id) else { return }
    liveness.idleSession[countdown.generation] = nil
  }

  /// The lone participant, if the session still has exactly one.
  private func loneParticipant(_ id: String) -> (Session, Participant)? {
    guard let session = sessions[id], session.count == 1, let only = session.members.first else { return nil }
    return (session, only)
  }

  /// `session.idle_warning {session, timeoutAt}` (wall ms). A lost lone participant
  /// has no connection to warn; its countdown runs on regardless.
  func idleWarningDue(_ id: String, at: Instant) {
    guard let countdown = liveness.idle[id], let (_, only) = loneParticipant(id), let c = only.connection
    else { return }
    let timeoutAt = at.wallMs + (countdown.endsAtMonoMs - at.monoMs)
    sendPersonal(c, type: "session.idle_warning") { w in
      w.field("session", id)
      w.field("timeoutAt", timeoutAt)
    }
  }

  /// `session.timed_out {session}` to the lone participant, then its removal.
  func idleEnded(_ id: String, at: Instant) {
    cancelIdle(id)
    guard let (session, only) = loneParticipant(id) else { return }
    if let c = only.connection {
      sendPersonal(c, type: "session.timed_out") { w in w.field("session", id) }
    }
    removeParticipant(only, from: session, reason: .idle, by: nil, at: at)
  }
}
