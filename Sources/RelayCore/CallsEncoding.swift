// Wire shapes of the call events (§9), the HTTP call object (§9, protocol/ §11) and
// the webhook bodies (§11). Each is encoded once, straight to bytes, and shared by
// every recipient.
import RelayProtocol

extension JSONWriter {
  /// `from` of `call.incoming` and the call object: `{uid, name, avatar?}`.
  mutating func caller(_ c: CallCaller) {
    beginObject()
    field("uid", c.uid)
    field("name", c.name)
    optionalField("avatar", c.avatar)
    endObject()
  }

  mutating func uidArray(_ uids: [String]) {
    beginArray()
    for uid in uids { string(uid) }
    endArray()
  }

  /// The fields `call.incoming`, the call object and `call.offline` share.
  mutating func callSummary(_ call: Call, metadata: Bool = true) {
    field("callId", call.id)
    field("sessionId", call.sessionId)
    key("from")
    caller(call.caller)
    key("to")
    uidArray(call.to)
    field("callType", call.callType.rawValue)
    if metadata, let encoded = call.metadata {
      key("metadata")
      raw(encoded)
    }
    field("expiresAt", call.expiresAtWallMs)
  }
}

extension RelayCore {
  /// §9 `call.incoming {callId, sessionId, from, to, callType, metadata?, expiresAt}`,
  /// encoded on first use and reused for devices that connect later.
  func incomingPayload(_ call: Call) -> Payload {
    if let cached = call.incoming { return cached }
    let payload = makeMessage(type: "call.incoming") { w in w.callSummary(call) }
    call.incoming = payload
    return payload
  }

  /// `{type, callId, uid}`: call.ringing, call.offline, call.busy, call.unanswered;
  /// `call.ringing`/`call.offline` add `pushed` (§9a: devices pushed at ring start).
  func calleeEvent(_ type: String, _ call: Call, uid: String, pushed: Int? = nil) -> Payload {
    makeMessage(type: type) { w in
      w.field("callId", call.id)
      w.field("uid", uid)
      if let pushed { w.field("pushed", pushed) }
    }
  }

  func cancelledEvent(_ call: Call, _ reason: CancelReason) -> Payload {
    makeMessage(type: "call.cancelled") { w in
      w.field("callId", call.id)
      w.field("reason", reason.rawValue)
    }
  }

  /// The HTTP call object (§9): `{callId, sessionId, from, to, callType, metadata?,
  /// expiresAt, state, callees: {uid: state}}`; `callees` in `to` order.
  func callObject(_ call: Call) -> [UInt8] {
    var w = JSONWriter()
    w.beginObject()
    w.callSummary(call)
    w.field("state", call.stateName)
    w.key("callees")
    w.beginObject()
    for callee in call.callees {
      w.key(callee.uid)  // a user id: escaped like any string
      w.string(callee.state.rawValue)
    }
    w.endObject()
    w.endObject()
    return w.bytes
  }

  /// HTTP error body: `{type: "error", code, message}` as the schema of protocol/
  /// `schema/http/error.json` says, plus `error` (the code) for clients that look for
  /// an `error` member.
  func callErrorBody(_ code: ErrorCode, _ message: String) -> [UInt8] {
    var w = JSONWriter()
    w.beginObject()
    w.field("type", "error")
    w.field("code", code.rawValue)
    w.field("message", message)
    w.field("error", code.rawValue)
    w.endObject()
    return w.bytes
  }

  // MARK: Webhook (§11)

  /// Queues a webhook effect `{event, callId, sessionId, …}`; the shell delivers it (or
  /// drops it when no webhook is configured).
  func webhook(_ event: String, _ call: Call, at: Instant, _ body: (inout JSONWriter) -> Void) {
    var w = JSONWriter()
    w.beginObject()
    w.field("event", event)
    w.field("callId", call.id)
    w.field("sessionId", call.sessionId)
    body(&w)
    w.field("sentAt", at.wallMs)
    w.endObject()
    calls.stats.webhooks[event, default: 0] += 1
    effects.append(.webhook(event: event, body: Payload(w.bytes)))
  }

  /// §11 session lifecycle (when `config.sessionWebhooks`): `session.created` when a
  /// session comes into being (admin API or first join), `session.ended` when its last
  /// participant is gone.
  func sessionWebhook(_ event: String, _ sessionId: String, at: Instant) {
    guard config.sessionWebhooks else { return }
    var w = JSONWriter()
    w.beginObject()
    w.field("event", event)
    w.field("sessionId", sessionId)
    w.field("sentAt", at.wallMs)
    w.endObject()
    calls.stats.webhooks[event, default: 0] += 1
    effects.append(.webhook(event: event, body: Payload(w.bytes)))
  }

  /// §11 `call.offline`: everything an app server needs for a VoIP push, with
  /// `sentAt` and `expiresAt` so a late push is recognisable.
  func webhookOffline(_ call: Call, uid: String, at: Instant) {
    webhook("call.offline", call, at: at) { w in
      w.field("uid", uid)
      w.key("from")
      w.caller(call.caller)
      w.key("to")
      w.uidArray(call.to)
      w.field("callType", call.callType.rawValue)
      if let encoded = call.metadata {
        w.key("metadata")
        w.raw(encoded)
      }
      w.field("expiresAt", call.expiresAtWallMs)
    }
  }
}
