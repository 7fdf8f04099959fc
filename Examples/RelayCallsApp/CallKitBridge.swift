// Ringing through CallKit and PushKit (iOS). Not built by the package: copy into an
// app target with the "Voice over IP" background mode. docs/push.md explains it.
//
// The path of a call to a user whose app is suspended or killed (protocol/ §9a):
// 1. At launch the app registers its PushKit token with the relay
//    (`registerPushToken(_:kind: .apnsVoip)`), tied to this install's device id
//    (`hello.device`, kept by the SDK).
// 2. The caller's `initiateCall` rings every device of the callee: devices with an
//    open, foreground connection over the socket, every other one with exactly one
//    VoIP push whose `relay` object is the `call.incoming` event.
// 3. iOS wakes the app: `pushRegistry(_:didReceiveIncomingPushWith:…)` decodes it
//    (`RelayPush.decode(dictionaryPayload:)`) and reports the call to CallKit
//    before it returns, even for a push that arrives too late.
// 4. The user answers in the CallKit UI: `CXAnswerCallAction` → `acceptCall` over
//    HTTP (`client.http`), which needs no socket; then `connect()` and join.
// 5. If the call stops ringing first, `onIncomingCallCancelled` (socket) or the
//    relay's `call.cancelled` push ends the CallKit call with the matching reason.

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
    // Sent as hex for this device (client.deviceID). PushKit may call this before the
    // socket is up (a socket command then fails with .notConnected), so over HTTP.
    #if DEBUG
      let environment = PushEnvironment.sandbox
    #else
      let environment = PushEnvironment.production
    #endif
    let http = client.http
    let token = credentials.token
    Task { try? await http.registerPushToken(token, kind: .apnsVoip, environment: environment) }
  }

  func pushRegistry(
    _ registry: PKPushRegistry, didReceiveIncomingPushWith payload: PKPushPayload, for type: PKPushType,
    completion: @escaping () -> Void
  ) {
    let update = CXCallUpdate()
    let push = RelayPush.decode(dictionaryPayload: payload.dictionaryPayload)
    guard case .incomingCall(let call) = push else {
      // iOS requires a reported call for every VoIP push; the relay sends only rings.
      let uuid = UUID()
      update.remoteHandle = CXHandle(type: .generic, value: "Unknown")
      provider.reportNewIncomingCall(with: uuid, update: update) { [self] _ in
        provider.reportCall(with: uuid, endedAt: nil, reason: .failed)
        completion()
      }
      return
    }
    let uuid = uuid(for: call.id)
    update.remoteHandle = CXHandle(type: .generic, value: call.from.uid)
    update.localizedCallerName = call.from.name
    update.hasVideo = call.callType == .video
    // iOS requires reporting every VoIP push as a call, even a late one.
    provider.reportNewIncomingCall(with: uuid, update: update) { [self] _ in
      let nowMs = Int64(Date().timeIntervalSince1970 * 1000)
      if call.expiresAt > 0, nowMs >= call.expiresAt {
        provider.reportCall(with: uuid, endedAt: nil, reason: .unanswered)
        uuids[call.id] = nil
      } else {
        client.connect()  // for cancellations and the media session; answering needs no socket
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
        // Over HTTP: the socket may not be up yet this soon after a VoIP push.
        let call = try await client.http.acceptCall(callID: callID)
        action.fulfill()
        try await client.joinSession(sessionID: call.sessionID)  // waits for `welcome`
        // Start the media for call.sessionID here.
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
      // Declined from the lock screen, maybe before the socket is up.
      let http = client.http
      Task { _ = try? await http.rejectCall(callID: callID) }
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
