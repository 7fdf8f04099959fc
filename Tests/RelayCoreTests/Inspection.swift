// Read-only views of the core's state for the tests and the simulator: they copy, and
// they never change what the core does next. Kept here, not in the production target.
@testable import RelayCore

/// One participant as the core holds it.
struct ParticipantView: Equatable, Sendable, CustomStringConvertible {
  let uid: String
  /// `connected` or `lost` (§5).
  let status: String
  /// The member connection; nil while lost.
  let connection: ConnectionID?

  var description: String { "\(uid):\(status)" }
}

/// One session as the core holds it: what every member's event stream must add up to.
struct SessionView: Equatable, Sendable {
  let id: String
  /// Number of the last session event.
  let seq: Int64
  /// Participants in join order.
  let participants: [ParticipantView]
  /// Raised hands' uids in queue order (§7).
  let hands: [String]
}

extension RelayCore {
  /// The state of one session, or nil if it does not exist. For tests and tools.
  func debugSnapshot(session id: String) -> SessionView? {
    guard let session = sessions[id] else { return nil }
    return SessionView(
      id: id, seq: session.seq,
      participants: session.members.map {
        ParticipantView(uid: $0.uid, status: $0.status.rawValue, connection: $0.connection)
      },
      hands: session.hands.map(\.uid))
  }

  /// Called with (session, seq, payload) for every session event as it is emitted,
  /// recipients or not (the simulator checks every stream against it). For tests and
  /// tools only: the core's behaviour does not depend on it.
  var debugEventTap: ((String, Int64, Payload) -> Void)? {
    get { liveness.eventTap }
    set { liveness.eventTap = newValue }
  }

  /// Every session id, sorted. For tests and tools.
  var debugSessionIds: [String] { sessions.keys.sorted() }

  /// Whether the user has a live connection (§5, §9). For tests and tools.
  func debugIsUserOnline(_ uid: String) -> Bool { isUserOnline(uid) }
}
