// The simulated client of SimulationTests: one WebSocket connection, and what its
// user would rebuild from the messages it receives (per session: seq position,
// participants with status, hand queue).
import RelayProtocol

@testable import RelayCore


/// A session as one member's messages describe it.
struct SessionModel: Equatable {
  var seq: Int64
  var participants: [ParticipantView]
  var hands: [String]
}

final class SimClient {
  let c: ConnectionID
  let uid: String
  /// `welcome` received.
  var ready = false
  /// The shell has not reported it closed to the core yet.
  var open = true
  /// Half-open: stopped sending frames (pongs included) at `silentSinceMs`.
  var silent = false
  var silentSinceMs: Int64 = 0
  /// When the core made it lost (unclean close or heartbeat drop), and its grace.
  var lostAtMs: Int64?
  var lostGraceMs: Int64 = 0
  /// Last accepted `client.background`.
  var background = false
  var resumeToken: String?
  /// Its token was used by a successful resume.
  var spent = false
  /// For a resuming client: what `welcome.resumed` must say.
  var expectResumed: Bool?
  /// Sessions in the order it learnt of them, and their models.
  var sessionOrder: [String] = []
  var views: [String: SessionModel] = [:]

  init(c: ConnectionID, uid: String) {
    self.c = c
    self.uid = uid
  }

  var sessions: [String] { sessionOrder.filter { views[$0] != nil } }

  func setView(_ id: String, _ model: SessionModel) {
    if !sessionOrder.contains(id) { sessionOrder.append(id) }
    views[id] = model
  }

  func dropView(_ id: String) {
    views[id] = nil
    sessionOrder.removeAll { $0 == id }
  }
}

/// Decoding of the parts of server messages the model needs.
enum SimDecode {
  static func participants(_ value: JSONValue?) -> [ParticipantView] {
    (value?.arrayValue ?? []).map(participant)
  }

  static func participant(_ value: JSONValue) -> ParticipantView {
    ParticipantView(
      uid: value["uid"]?.stringValue ?? "?", status: value["status"]?.stringValue ?? "?", connection: nil)
  }

  static func snapshot(_ message: JSONValue) -> SessionModel {
    SessionModel(
      seq: message["seq"]?.numberValue?.int64 ?? -1,
      participants: participants(message["participants"]),
      hands: (message["hands"]?.arrayValue ?? []).compactMap { $0["uid"]?.stringValue })
  }

  /// Applies one session event to a model; returns a complaint if it cannot apply.
  static func apply(_ type: String, _ event: JSONValue, to model: inout SessionModel) -> String? {
    let uid = event["uid"]?.stringValue
    func setStatus(_ status: String) -> String? {
      guard let i = model.participants.firstIndex(where: { $0.uid == uid }) else { return "\(type) for non-participant" }
      model.participants[i] = ParticipantView(uid: uid!, status: status, connection: nil)
      return nil
    }
    switch type {
    case "participant.joined":
      model.participants.append(participant(event["participant"] ?? .null))
    case "participant.left", "participant.timed_out":
      model.participants.removeAll { $0.uid == uid }
    case "participant.lost": return setStatus("lost")
    case "participant.restored": return setStatus("connected")
    case "hand.raised": model.hands.append(uid ?? "?")
    case "hand.lowered": model.hands.removeAll { $0 == uid }
    case "hands.cleared": model.hands.removeAll()
    case "message": break
    default: return "unknown session event \(type)"
    }
    return nil
  }

  static let sessionEvents: Set<String> = [
    "participant.joined", "participant.left", "participant.timed_out", "participant.lost",
    "participant.restored", "hand.raised", "hand.lowered", "hands.cleared", "message",
  ]
}

/// Views compare without connections: a client knows statuses, not connection ids.
extension SessionView {
  var model: SessionModel {
    SessionModel(
      seq: seq,
      participants: participants.map { ParticipantView(uid: $0.uid, status: $0.status, connection: nil) },
      hands: hands)
  }
}
