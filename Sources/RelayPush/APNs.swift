// APNs provider API over HTTP/2 (Apple, "Sending notification requests to APNs";
// PROTOCOL.md §9a): token-based auth, one request per push.
public import RelayCore
import RelayProtocol

/// The APNs settings of `relay serve` (`--apns-*`).
public struct APNsSettings: Sendable, Equatable {
  public var keyId: String
  public var teamId: String
  /// The app's bundle id; VoIP pushes go to `<topic>.voip`.
  public var topic: String
  public var productionURL: String
  public var sandboxURL: String

  public init(
    keyId: String, teamId: String, topic: String, productionURL: String = "https://api.push.apple.com",
    sandboxURL: String = "https://api.sandbox.push.apple.com"
  ) {
    self.keyId = keyId
    self.teamId = teamId
    self.topic = topic
    self.productionURL = productionURL
    self.sandboxURL = sandboxURL
  }
}

public enum APNs {
  /// How long a missed-call alert may wait in APNs for a phone that is off: a day.
  /// The ring itself expires at `expiresAt`; the notice that it was missed is worth
  /// showing later.
  public static let missedCallLifetimeSeconds: Int64 = 86_400

  /// The request for `job`, authorised by the provider token `bearer` (an ES256
  /// JWT, `APNsProviderToken`).
  ///
  /// - `apns-voip` ring: `apns-push-type: voip`, topic `<topic>.voip`, priority 10,
  ///   body `{"relay": <call.incoming>}` (PushKit hands the app the whole payload).
  /// - `apns` ring: an alert (`loc-key RELAY_INCOMING_CALL`) carrying the same
  ///   `relay` object.
  /// - ended: an alert `loc-key RELAY_MISSED_CALL` with `relay: {type:
  ///   "call.cancelled", callId, reason}`, never a second VoIP push (§9a: iOS ends
  ///   an app that gets a VoIP push without reporting a call). The core addresses
  ///   it to the device's alert token only: APNs refuses an alert to a VoIP token
  ///   (DeviceTokenNotForTopic).
  ///
  /// Priority is 10 for every push, the missed-call alert included: it replaces
  /// (same `apns-collapse-id`) an incoming-call alert that may still be on screen,
  /// and priority 5 lets APNs hold it back, leaving a ring visible that has ended.
  public static func request(_ job: PushJob, settings: APNsSettings, bearer: String) -> PushRequest {
    let base = job.target.environment == .sandbox ? settings.sandboxURL : settings.productionURL
    let voip = job.target.kind == .apnsVoip
    var expiration = job.expiresAtWallMs / 1000
    let body: [UInt8]
    let pushType: String
    switch job.message {
    case .ring(let event):
      pushType = voip ? "voip" : "alert"
      body = voip ? relayBody(event.bytes) : alertBody(key: "RELAY_INCOMING_CALL", job: job, relay: event.bytes)
    case .ended(let reason):
      pushType = "alert"
      expiration += missedCallLifetimeSeconds
      body = alertBody(key: "RELAY_MISSED_CALL", job: job, relay: cancelledEvent(job, reason: reason))
    }
    let topic = pushType == "voip" ? settings.topic + ".voip" : settings.topic
    return PushRequest(
      url: trimmedBase(base) + "/3/device/" + job.target.token,
      headers: [
        .init("authorization", "bearer " + bearer), .init("apns-push-type", pushType), .init("apns-topic", topic),
        .init("apns-priority", "10"), .init("apns-expiration", String(max(expiration, 0))),
        .init("apns-collapse-id", job.callId), .init("content-type", "application/json"),
      ],
      body: body)
  }

  /// What an APNs answer means (Apple, "Handling notification responses from APNs").
  public static func outcome(status: Int, headers: [(String, String)], body: [UInt8]) -> PushOutcome {
    if (200...299).contains(status) { return .sent }
    let reason = (try? JSONParser.parse(body))?["reason"]?.stringValue ?? "HTTP \(status)"
    switch (status, reason) {
    case (410, _), (400, "BadDeviceToken"), (400, "DeviceTokenNotForTopic"):
      return .tokenGone(reason: reason)
    case (403, "ExpiredProviderToken"):
      return .renewCredentials(reason: reason)
    case _ where Answer.isTransient(status):
      return .retry(reason: reason, afterMs: Answer.retryAfterMs(headers))
    default:
      return .failed(reason: reason)
    }
  }

  /// `{"relay": <event>}`: the event's bytes are embedded as they are.
  static func relayBody(_ event: [UInt8]) -> [UInt8] {
    Array(#"{"relay":"#.utf8) + event + [UInt8(ascii: "}")]
  }

  static func alertBody(key: String, job: PushJob, relay: [UInt8]) -> [UInt8] {
    var writer = JSONWriter()
    writer.beginObject()
    writer.key("aps")
    writer.beginObject()
    writer.key("alert")
    writer.beginObject()
    writer.field("loc-key", key)
    writer.key("loc-args")
    writer.beginArray()
    writer.string(job.callerName)
    writer.endArray()
    writer.endObject()
    writer.field("sound", "default")
    writer.endObject()
    writer.key("relay")
    writer.raw(relay)
    writer.endObject()
    return writer.bytes
  }

  /// The `call.cancelled` event object a socket would get (§9).
  static func cancelledEvent(_ job: PushJob, reason: String) -> [UInt8] {
    var writer = JSONWriter()
    writer.beginObject()
    writer.field("type", "call.cancelled")
    writer.field("callId", job.callId)
    writer.field("reason", reason)
    writer.endObject()
    return writer.bytes
  }

  static func trimmedBase(_ url: String) -> String {
    url.hasSuffix("/") ? String(url.dropLast()) : url
  }
}
