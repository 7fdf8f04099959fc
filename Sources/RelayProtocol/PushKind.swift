// The push vocabulary of the wire (protocol/ §9a `push.register`): which service a
// token belongs to and, for APNs, its environment. One definition for the relay's
// core and the client SDK, which both speak the protocol.

/// A registration's provider and token type (`push.register.kind`).
public enum PushKind: String, Sendable, Equatable, CaseIterable {
  /// An APNs VoIP token from PushKit (`PKPushRegistry`, type `.voIP`): rings through CallKit.
  case apnsVoip = "apns-voip"
  /// An APNs alert token (`registerForRemoteNotifications`): a visible notification.
  case apns
  /// A Firebase Cloud Messaging registration token (Android): data messages.
  case fcm

  /// APNs tokens are hex and know an environment; FCM tokens are opaque text.
  public var isAPNs: Bool { self != .fcm }
}

/// The APNs environment a token was issued for (`push.register.environment`):
/// development builds of an app get sandbox tokens, TestFlight and App Store builds
/// production ones. FCM tokens are always production.
public enum PushEnvironment: String, Sendable, Equatable, CaseIterable {
  /// `api.push.apple.com`.
  case production
  /// `api.sandbox.push.apple.com`.
  case sandbox
}
