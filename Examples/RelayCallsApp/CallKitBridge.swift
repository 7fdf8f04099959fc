// Ringing through CallKit and PushKit (iOS). Not built by the package: copy into an
// app target with the "Voice over IP" background mode.
//
// The path of a call to a user whose app is not running:
// 1. The caller's `initiateCall` finds no online connection: the relay answers the
//    caller `call.offline` and POSTs the `call.offline` webhook to your server
//    (`callId`, `sessionId`, `from`, `callType`, `sentAt`, `expiresAt`).
// 2. Your server verifies `X-Relay-Signature` and sends a VoIP push with those fields.
// 3. iOS wakes the app: `pushRegistry(_:didReceiveIncomingPushWith:…)` must report a
//    call to CallKit before it returns, even for a push that arrives too late.
// 4. The app connects; right after `welcome` the relay sends `call.incoming` for
//    every call still ringing for this user, which reaches `onIncomingCallReceived`.
// 5. The user answers in the CallKit UI: `CXAnswerCallAction` → `acceptCall(callID:)`.
//    Commands issued while the client is still connecting wait for `welcome`, so
//    the answer need not wait for step 4. (Apps without a socket can use
//    `POST /v1/calls/{callId}/accept` with the user's token instead.)
// 6. If the call stops ringing first (cancelled, answered on another device,
//    unanswered), `onIncomingCallCancelled` ends the CallKit call with the matching
//    reason; `call.cancelled` pushes from your server cover the app-not-running case.

import CallKit
import Foundation
import PushKit
import RelayClient

final class CallKitBridge: NSObject, CXProviderDelegate, PKPushRegistryDelegate, CallListener {
  private let client: RelayClient
  private let provider: CXProvider
  private let registry = PKPushRegistry(queue: .main)
  /// CallKit identifies calls by UUID, the relay by `callId`.
  private var uuids: [String: UUID] = [:]

  init(client: RelayClient) {
    self.client = client
    let configuration = CXProviderConfiguration()
    configuration.supportsVideo = true
    configuration.supportedHandleTypes = [.generic]
    provider = CXProvider(configuration: configuration)
    super.init()
    provider.setDelegate(self, queue: .main)
    registry.delegate = self
    registry.desiredPushTypes = [.voIP]
    client.addCallListener(id: "callkit", self)
  }

  // MARK: PushKit

  func pushRegistry(_ registry: PKPushRegistry, didUpdate credentials: PKPushCredentials, for type: PKPushType) {
    // Send credentials.token to your server, which pushes for `call.offline`.
  }

  func pushRegistry(
    _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
    completion: @escaping () -> Void
  ) {
    let body = payload.dictionaryPayload
    guard let callID = body["callId"] as? String else { return completion() }
    let caller = (body["from"] as? [String: Any])?["name"] as? String ?? "Unknown"
    let expiresAt = (body["expiresAt"] as? NSNumber)?.int64Value ?? 0
    let uuid = uuid(for: callID)
    let update = CXCallUpdate()
    update.remoteHandle = CXHandle(type: .generic, value: caller)
    update.hasVideo = (body["callType"] as? String) == "video"
    // iOS requires reporting every VoIP push as a call, even a late one.
    provider.reportNewIncomingCall(with: uuid, update: update) { [self] _ in
      let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
      if expiresAt > 0, nowMs >= expiresAt {
        provider.reportCall(with: uuid, endedAt: nil, reason: .unanswered)
      } else {
        client.connect()  // the relay re-announces the ringing call after `welcome`
      }
      completion()
    }
  }

  // MARK: RelayClient → CallKit

  func onIncomingCallReceived(_ call: Call) {
    // Already reported when a push woke us; otherwise (app in foreground) report now.
    guard uuids[call.id] == nil else { return }
    let update = CXCallUpdate()
    update.remoteHandle = CXHandle(type: .generic, value: call.from.name)
    update.hasVideo = call.callType == .video
    provider.reportNewIncomingCall(with: uuid(for: call.id), update: update) { _ in }
  }

  func onIncomingCallCancelled(_ call: Call, reason: CallCancelReason) {
    guard let uuid = uuids.removeValue(forKey: call.id) else { return }
    let ended: CXCallEndedReason
    switch reason {
    case .answeredElsewhere: ended = .answeredElsewhere
    case .rejectedElsewhere: ended = .declinedElsewhere
    case .unanswered: ended = .unanswered
    case .cancelled, .callerTimedOut: ended = .remoteEnded
    }
    provider.reportCall(with: uuid, endedAt: nil, reason: ended)
  }

  func onCallEnded(_ call: Call, by uid: String, reason: String, durationMs: Int64) {
    guard let uuid = uuids.removeValue(forKey: call.id) else { return }
    provider.reportCall(with: uuid, endedAt: nil, reason: .remoteEnded)
  }

  // MARK: CallKit → RelayClient

  func provider(_ provider: CXProvider, perform action: CXAnswerCallAction) {
    guard let callID = callID(for: action.callUUID) else { return action.fail() }
    Task { @MainActor in
      do {
        try await client.acceptCall(callID: callID)
        action.fulfill()
        // Join the media session here: call.sessionID in client.state.calls[callID].
      } catch {
        // .conflict: answered elsewhere or no longer ringing; .notFound: unknown call.
        action.fail()
      }
    }
  }

  func provider(_ provider: CXProvider, perform action: CXEndCallAction) {
    guard let callID = callID(for: action.callUUID) else { return action.fulfill() }
    uuids[callID] = nil
    if client.state.calls[callID]?.status == .accepted {
      client.endCall(callID: callID)
    } else {
      client.rejectCall(callID: callID)
    }
    action.fulfill()
  }

  func providerDidReset(_ provider: CXProvider) { uuids.removeAll() }

  // MARK: Ids

  private func uuid(for callID: String) -> UUID {
    if let known = uuids[callID] { return known }
    let made = UUID()
    uuids[callID] = made
    return made
  }

  private func callID(for uuid: UUID) -> String? {
    uuids.first { $0.value == uuid }?.key
  }
}
