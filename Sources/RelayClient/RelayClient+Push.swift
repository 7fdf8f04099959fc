// Push registration over the socket (`push.register` / `push.unregister`, protocol/
// §9a), in the two forms every command has: fire-and-forget and async. The same
// over HTTP, for an app whose socket is not up, is `RelayHTTPAPI`.

public import Foundation
public import RelayClientCore
import RelayProtocol

extension RelayClient {
  /// Registers this device's push token (`push.register`) for `hello.device`
  /// (`deviceID`). PushKit and `registerForRemoteNotifications` hand the token as
  /// bytes: they are sent as lowercase hex, as APNs wants them. A new token for the
  /// same kind replaces the old one; issued while connecting, it waits for `welcome`.
  public func registerPushToken(_ token: Data, kind: PushKind, environment: PushEnvironment = .production) {
    registerPushToken(DeviceID.apnsToken(Array(token)), kind: kind, environment: environment)
  }

  /// Registers a push token and returns once the relay stored it.
  /// - Throws: `.server(code: .badRequest, …)` for a malformed token or without a device id.
  public func registerPushToken(_ token: Data, kind: PushKind, environment: PushEnvironment = .production)
    async throws(RelayError)
  {
    try await registerPushToken(DeviceID.apnsToken(Array(token)), kind: kind, environment: environment)
  }

  /// Registers a token given as text: an FCM registration token, or an APNs token
  /// already in hex.
  public func registerPushToken(_ token: String, kind: PushKind, environment: PushEnvironment = .production) {
    post(.command(.registerPushToken(token: token, kind: kind, environment: environment, device: nil), requestID: nil))
  }

  /// Registers a token given as text and returns once the relay stored it.
  public func registerPushToken(_ token: String, kind: PushKind, environment: PushEnvironment = .production)
    async throws(RelayError)
  {
    _ = try await request(.registerPushToken(token: token, kind: kind, environment: environment, device: nil)).get()
  }

  /// Removes a registered token (`push.unregister`), e.g. when the user signs out.
  public func unregisterPushToken(_ token: Data) {
    unregisterPushToken(DeviceID.apnsToken(Array(token)))
  }

  /// Removes a registered token and returns once the relay removed it.
  public func unregisterPushToken(_ token: Data) async throws(RelayError) {
    try await unregisterPushToken(DeviceID.apnsToken(Array(token)))
  }

  /// Removes a token given as text.
  public func unregisterPushToken(_ token: String) {
    post(.command(.unregisterPushToken(token), requestID: nil))
  }

  /// Removes a token given as text and returns once the relay removed it.
  public func unregisterPushToken(_ token: String) async throws(RelayError) {
    _ = try await request(.unregisterPushToken(token)).get()
  }

  /// The relay's HTTP API with this client's URL, token and device id: push
  /// registration and call actions without the socket (`RelayHTTPAPI`). In dev mode
  /// (`.dev` auth) the relay answers every request 401.
  public var http: RelayHTTPAPI {
    let token: String
    if case .token(let jwt) = auth { token = jwt } else { token = "" }
    return RelayHTTPAPI(relayURL: url, token: token, device: deviceID)
  }
}

extension RelayPush {
  /// Decodes a PushKit / APNs payload dictionary (`{"aps": …, "relay": {…}}`, §9a)
  /// into the `Call` to report to CallKit, or the ring's end. Runs before any socket
  /// is up; nil when the payload did not come from the relay.
  public static func decode(dictionaryPayload payload: [AnyHashable: Any]) -> RelayPush? {
    guard let relay = payload["relay"] else { return nil }
    let bytes: [UInt8]
    if let text = relay as? String {
      bytes = Array(text.utf8)
    } else {
      // Foundation's own types (NSDictionary, NSNumber, …) as JSON, read back by the
      // relay's parser: one JSON reader for the socket and the push.
      // (Key order is lost in a dictionary; sorted keys at least make it repeatable.)
      guard JSONSerialization.isValidJSONObject(relay),
        let data = try? JSONSerialization.data(withJSONObject: relay, options: [.sortedKeys])
      else { return nil }
      bytes = Array(data)
    }
    guard let object = (try? JSONParser.parse(bytes))?.objectValue else { return nil }
    return decode(relay: object)
  }
}
