// Commands as wire JSON (§17, "Commands"): one compact object per text message.

import RelayProtocol

/// Encodes the client's commands with `JSONWriter`.
enum CommandEncoding {
  static func hello(
    _ auth: RelayAuth, device: String? = nil, resume: (token: String, sessions: [(String, Int64)])?,
    presenceDiff: Bool = false
  ) -> [UInt8] {
    var w = JSONWriter()
    w.beginObject()
    w.field("type", "hello")
    w.field("id", "hello")
    switch auth {
    case .token(let token):
      w.field("token", token)
    case .dev(let uid, let name, let role):
      w.key("dev")
      w.beginObject()
      w.field("uid", uid)
      w.field("name", name)
      w.optionalField("role", role)
      w.endObject()
    }
    // §4: the app install, so the relay knows which push tokens this connection
    // stands for (a device with an open, foreground connection is not pushed).
    w.optionalField("device", device)
    if let resume {
      w.key("resume")
      w.beginObject()
      w.field("token", resume.token)
      w.key("sessions")
      w.beginObject()
      for (session, seq) in resume.sessions {
        w.key(session)  // a session id: escaped like any string
        w.number(seq)
      }
      w.endObject()
      w.endObject()
    }
    if presenceDiff {
      w.key("capabilities")
      w.beginArray()
      w.string(Capability.presenceDiff)
      w.endArray()
    }
    w.endObject()
    return w.bytes
  }

  static func ping() -> [UInt8] { Array(#"{"type":"ping"}"#.utf8) }

  static func background(_ value: Bool) -> [UInt8] {
    var w = JSONWriter()
    w.beginObject()
    w.field("type", "client.background")
    w.field("background", value)
    w.endObject()
    return w.bytes
  }

  static func encode(_ command: ClientCommand, id: String) -> [UInt8] {
    var w = JSONWriter()
    w.beginObject()
    switch command {
    case .joinSession(let s): header(&w, "session.join", id, session: s)
    case .leaveSession(let s): header(&w, "session.leave", id, session: s)
    case .raiseHand(let s): header(&w, "hand.raise", id, session: s)
    case .lowerHand(let s, let uid):
      header(&w, "hand.lower", id, session: s)
      w.optionalField("uid", uid)
    case .lowerAllHands(let s): header(&w, "hand.lower_all", id, session: s)
    case .sendMessage(let s, let data):
      header(&w, "message.send", id, session: s)
      w.key("data")
      w.value(data)
    case .removeParticipant(let s, let uid):
      header(&w, "participant.remove", id, session: s)
      w.field("uid", uid)
    case .initiateCall(let to, let callType, let metadata):
      header(&w, "call.initiate", id, session: nil)
      w.key("to")
      w.value(.array(to.map { .string($0) }))
      w.field("callType", callType.rawValue)
      if let metadata {
        w.key("metadata")
        w.value(.object(metadata))
      }
    case .acceptCall(let call): callHeader(&w, "call.accept", id, call)
    case .rejectCall(let call, let reason):
      callHeader(&w, "call.reject", id, call)
      w.optionalField("reason", reason)
    case .cancelCall(let call): callHeader(&w, "call.cancel", id, call)
    case .endCall(let call): callHeader(&w, "call.end", id, call)
    case .registerPushToken(let token, let kind, let environment, let device):
      header(&w, "push.register", id, session: nil)
      w.field("token", token)
      w.field("kind", kind.rawValue)
      // §9a: the environment is an APNs notion (default production).
      if kind.isAPNs { w.field("environment", environment.rawValue) }
      w.optionalField("device", device)
    case .unregisterPushToken(let token):
      header(&w, "push.unregister", id, session: nil)
      w.field("token", token)
    }
    w.endObject()
    return w.bytes
  }

  private static func header(_ w: inout JSONWriter, _ type: String, _ id: String, session: String?) {
    w.field("type", type)
    w.field("id", id)
    w.optionalField("session", session)
  }

  private static func callHeader(_ w: inout JSONWriter, _ type: String, _ id: String, _ call: String) {
    header(&w, type, id, session: nil)
    w.field("callId", call)
  }
}
