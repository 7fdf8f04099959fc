// The SDK's push decoders against the pushes the relay really builds (RelayPush's
// APNs and FCM requests, protocol/ §9a): what PushKit or FirebaseMessaging would hand
// the app decodes to the same `Call` the socket gives, and the follow-ups to the
// ring's end. A change on either side that breaks the app's CallKit path fails here.

import Foundation
import RelayProtocol
import Testing

@testable import RelayClient

@Suite struct PushContractTests {
  /// `call.incoming` as the relay's core writes it for sockets and pushes.
  static let event = Array(
    #"{"type":"call.incoming","callId":"c-1","sessionId":"s-1","from":{"uid":"alice","name":"Alice","avatar":"https://a.example/a.png"},"to":["bob"],"callType":"video","metadata":{"topic":"standup","n":2},"expiresAt":1764260045000}"#
      .utf8)

  /// The call the socket path makes of `event`.
  static var socketCall: Call? {
    guard case .incomingCall(let call)? = (try? JSONParser.parse(event).objectValue).flatMap(RelayPush.decode(relay:))
    else { return nil }
    return call
  }

  /// `call` with its metadata members in key order.
  static func keyOrdered(_ call: Call) -> Call {
    var copy = call
    copy.metadata = call.metadata.map { JSONObject($0.members.sorted { $0.key < $1.key }) }
    return copy
  }

  /// An APNs body as PushKit / UNNotification hand it to the app: Foundation objects.
  static func dictionary(_ body: [UInt8]) throws -> [AnyHashable: Any] {
    try #require(try JSONSerialization.jsonObject(with: Data(body)) as? [AnyHashable: Any])
  }

  /// An FCM request's `message.data`, as `RemoteMessage.data` gives it.
  static func fcmData(_ body: [UInt8]) throws -> [String: String] {
    let message = try #require(try JSONParser.parse(body)["message"]?["data"]?.objectValue)
    var data: [String: String] = [:]
    for member in message.members { data[member.key] = try #require(member.value.stringValue) }
    return data
  }

  @Test("the VoIP push and the incoming-call alert decode to the socket's Call")
  func apnsRing() throws {
    let call = try #require(Self.socketCall)
    #expect(call.id == "c-1" && call.sessionID == "s-1" && call.from.name == "Alice" && call.callType == .video)
    #expect(call.expiresAt == 1_764_260_045_000 && call.metadata?["topic"] == .string("standup"))
    for kind in ["apns-voip", "apns"] {
      let body = relayPushBody(kind: kind, event: Self.event)
      guard case .incomingCall(let decoded)? = RelayPush.decode(dictionaryPayload: try Self.dictionary(body)) else {
        Issue.record("\(kind): not decoded from \(String(decoding: body, as: UTF8.self))")
        continue
      }
      // A Foundation dictionary keeps no member order: compare metadata by key.
      #expect(Self.keyOrdered(decoded) == Self.keyOrdered(call), "\(kind)")
    }
  }

  @Test("the missed-call alert: localisable loc-key and caller name, and the ring's end for the app")
  func apnsMissedCall() throws {
    let payload = try Self.dictionary(relayPushBody(kind: "apns", event: Self.event, endedReason: "unanswered"))
    #expect(RelayPush.decode(dictionaryPayload: payload) == .callCancelled(callID: "c-1", reason: .unanswered))
    let alert = (payload["aps"] as? [String: Any])?["alert"] as? [String: Any]
    #expect(alert?["loc-key"] as? String == "RELAY_MISSED_CALL")
    #expect(alert?["loc-args"] as? [String] == ["Alice"])
  }

  @Test("FCM data messages decode to the socket's Call, and to the end of the ring")
  func fcm() throws {
    let call = try #require(Self.socketCall)
    let ring = relayPushBody(kind: "fcm", event: Self.event)
    #expect(RelayPush.decode(fcmData: try Self.fcmData(ring)) == .incomingCall(call))
    let ended = relayPushBody(kind: "fcm", event: Self.event, endedReason: "answered_elsewhere")
    #expect(RelayPush.decode(fcmData: try Self.fcmData(ended)) == .callCancelled(callID: "c-1", reason: .answeredElsewhere))
  }
}
