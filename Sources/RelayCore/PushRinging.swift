// Which device gets which push, and when (PROTOCOL.md §9a):
// - A device is awake while a connection naming it (`hello.device`) is ready — open,
//   not lost (a silent socket is dropped by the shell's heartbeats at the timeout and
//   reaches the core as `closed(clean: false)`, as an abrupt close does) — and not
//   backgrounded (`client.background`).
// - When a call starts ringing a callee, each registered device of the callee that
//   is not awake gets one ring push; `call.ringing`/`call.offline.pushed` count them.
// - While the call still rings the callee, a device that stops being awake (goes to
//   the background, its connection is lost or closes) and was not pushed for this
//   call yet gets its ring push then. Never a second one per (call, device): iOS
//   kills an app that gets a VoIP push it does not report to CallKit.
// - When ringing ends for the callee, each pushed device gets at most one follow-up:
//   every kind for `cancelled`, `unanswered`, `caller_timed_out`; only `fcm` for
//   `answered_elsewhere` / `rejected_elsewhere` (an iOS app woken by the VoIP push
//   learns those over its socket or `GET /v1/calls/{id}`).
// - A device's ring token: `apns-voip`, else `fcm`, else `apns` (alert). An
//   `apns-voip` device's follow-up is an alert push, so it goes to the device's
//   `apns` token; without one it gets none: a VoIP token takes only VoIP pushes
//   (an alert to it is refused `DeviceTokenNotForTopic`, which would remove the
//   token), and a second VoIP push for one ring is what iOS punishes.
// Everything iterates arrays (registration order, hello order), so every replica
// emits the same jobs in the same order.
import RelayProtocol

extension RelayCore {
  /// §9a awake: a ready, foreground connection of `uid` names `device`.
  func isAwake(uid: String, device: String) -> Bool {
    userConnections.elements(withKey: uid).contains { $0.device == device && $0.phase == .ready && !$0.background }
  }

  /// At ring start: one ring push per registered device of the callee that is not
  /// awake. Returns how many were pushed (`pushed` of `call.ringing`/`call.offline`).
  func pushRingStart(_ call: Call, _ callee: Callee) -> Int {
    var count = 0
    for device in push.devices(of: callee.uid) where !isAwake(uid: callee.uid, device: device.device) {
      if ringPush(call, callee, device) { count += 1 }
    }
    return count
  }

  /// One ring push to `device`, unless it already had one for this call.
  @discardableResult
  func ringPush(_ call: Call, _ callee: Callee, _ device: PushDevice) -> Bool {
    guard !callee.pushed.contains(where: { $0.device == device.device }),
      let token = device.token(.apnsVoip) ?? device.token(.fcm) ?? device.token(.apns)
    else { return false }
    let target = PushTarget(
      uid: callee.uid, device: device.device, token: token.token, kind: token.kind, environment: token.environment)
    callee.pushed.append(target)
    emitPush(call, target, .ring(event: incomingPayload(call)))
    return true
  }

  /// A connection stopped counting as awake (backgrounded, lost, closed): if its
  /// device is now asleep, each call still ringing its user pushes it, once.
  func pushDeviceMayBeAsleep(_ connection: Connection, at: Instant) {
    guard let uid = connection.uid, let device = connection.device, !isAwake(uid: uid, device: device),
      let registered = push.devices(of: uid).first(where: { $0.device == device })
    else { return }
    for call in calls.liveCalls(of: uid) {
      guard let callee = call.callee(uid), callee.state == .ringing else { continue }
      ringPush(call, callee, registered)
    }
  }

  /// Ringing ended for `callee` with `reason`: the follow-ups of its pushed devices,
  /// except `device` (the one that answered, which needs none).
  func pushRingEnded(_ call: Call, _ callee: Callee, reason: CancelReason, except device: String? = nil) {
    guard !callee.pushed.isEmpty else { return }
    let everyKind = reason == .cancelled || reason == .unanswered || reason == .callerTimedOut
    let devices = push.devices(of: callee.uid)
    for target in callee.pushed where target.device != device {
      guard let destination = followUpTarget(target, devices), everyKind || destination.kind == .fcm else { continue }
      emitPush(call, destination, .ended(reason: reason.rawValue))
    }
    callee.pushed = []
  }

  /// Where a pushed device's follow-up goes (see the file comment); nil: nowhere.
  private func followUpTarget(_ ring: PushTarget, _ devices: [PushDevice]) -> PushTarget? {
    guard ring.kind == .apnsVoip else { return ring }
    guard let alert = devices.first(where: { $0.device == ring.device })?.token(.apns) else { return nil }
    return PushTarget(uid: ring.uid, device: ring.device, token: alert.token, kind: .apns, environment: alert.environment)
  }

  private func emitPush(_ call: Call, _ target: PushTarget, _ message: PushMessage) {
    switch message {
    case .ring: push.jobs["ring", default: 0] += 1
    case .ended: push.jobs["ended", default: 0] += 1
    }
    effects.append(
      .push(
        PushJob(
          target: target, callId: call.id, sessionId: call.sessionId, callerUid: call.caller.uid,
          callerName: call.caller.name, callType: call.callType.rawValue, expiresAtWallMs: call.expiresAtWallMs,
          message: message)))
  }
}
