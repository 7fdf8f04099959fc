// The kinds of push token and the APNs environments of protocol/ §9a
// (`push.register.kind`, `push.register.environment`): one definition for the relay
// core, its push service and the client SDK.

/// Which push service a token belongs to (`push.register.kind`, §9a).
public enum PushKind: String, Sendable, Equatable, CaseIterable {
  /// An APNs VoIP token from PushKit (`PKPushRegistry`, type `.voIP`): rings via CallKit.
  case apnsVoip = "apns-voip"
  /// An APNs alert token (`registerForRemoteNotifications`): a visible notification.
  case apns
  /// A Firebase Cloud Messaging registration token (Android): data messages.
  case fcm

  /// APNs tokens are hex and know an environment; FCM tokens are opaque text.
  public var isAPNs: Bool { self != .fcm }
}

/// The APNs environment a token was issued for (§9a): development builds of an app
/// get sandbox tokens, TestFlight and App Store builds production ones. FCM tokens
/// are always production.
public enum PushEnvironment: String, Sendable, Equatable, CaseIterable {
  /// `api.push.apple.com`.
  case production
  /// `api.sandbox.push.apple.com`.
  case sandbox
}
