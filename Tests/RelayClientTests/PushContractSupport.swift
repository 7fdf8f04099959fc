// The relay's own push requests (RelayPush over RelayCore's PushJob) for the SDK's
// contract tests: the relay side is built here, in a file of its own, so the tests
// read like an app that imports only RelayClient.

import RelayProtocol
import RelayCore
import RelayPush

/// What the relay sends one device for call `c-1` from Alice: the body of the APNs
/// or FCM request for a `kind` (`apns-voip`, `apns`, `fcm`) target, for the ring
/// (`endedReason` nil; `event` is the `call.incoming` object) or for its end.
func relayPushBody(kind: String, event: [UInt8], endedReason: String? = nil) -> [UInt8] {
  let message: PushMessage = endedReason.map { .ended(reason: $0) } ?? .ring(event: Payload(event))
  let job = PushJob(
    target: PushTarget(uid: "bob", device: "phone", token: "ab12", kind: PushKind(rawValue: kind)!, environment: .production),
    callId: "c-1", sessionId: "s-1", callerUid: "alice", callerName: "Alice", callType: "video",
    expiresAtWallMs: 1_764_260_045_000, message: message)
  if job.target.kind == .fcm {
    return FCM.request(job, baseURL: "https://fcm", projectId: "p", accessToken: "t", nowWallMs: 1_764_260_000_000).body
  }
  return APNs.request(job, settings: APNsSettings(keyId: "KEY", teamId: "TEAM", topic: "com.example.app"), bearer: "J").body
}
