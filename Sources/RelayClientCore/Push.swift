// Push on the client side (protocol/ §9a): the device id sent in `hello.device`
// (§4), the kinds of token an app registers, and the payloads the relay's pushes
// carry, decoded into the same `Call` the socket gives, so an app woken by a push
// can report the call to CallKit before any socket is up.

public import RelayProtocol
import RelayPrimitives

/// The app-install id of `hello.device` (§4): 1–128 bytes of `[A-Za-z0-9._:-]`.
public enum DeviceID {
  /// Longest id the relay accepts, in bytes.
  public static let maxBytes = PushFields.maxDeviceBytes

  /// Whether the relay accepts `id` as `hello.device` / `push.register.device`: the
  /// relay's own rule (`PushFields.isDevice`).
  public static func isValid(_ id: String) -> Bool { PushFields.isDevice(id) }

  /// A fresh id: 128 random bits as 32 hex digits, unguessable enough that two
  /// installs never collide. The shell passes a system generator; tests a seeded one.
  public static func generate(using generator: inout some RandomNumberGenerator) -> String {
    let bytes = (0..<16).map { _ in UInt8.random(in: 0...255, using: &generator) }
    return Hex.encode(bytes)
  }

  /// `bytes` as an APNs token: lowercase hex, as APNs expects it in `/3/device/<token>`.
  public static func apnsToken(_ bytes: [UInt8]) -> String { Hex.encode(bytes) }
}

/// What one push from the relay says (§9a), decoded.
public enum RelayPush: Sendable, Equatable {
  /// A call rings this user: report it to CallKit / show the ringing UI. `call` is
  /// what `onIncomingCallReceived` would get over the socket.
  case incomingCall(Call)
  /// Ringing ended for this device (`call.cancelled`): end the CallKit call with the
  /// matching reason (`unanswered`, `cancelled` → a missed call).
  case callCancelled(callID: String, reason: CallCancelReason)

  /// The call id either case is about.
  public var callID: String {
    switch self {
    case .incomingCall(let call): return call.id
    case .callCancelled(let id, _): return id
    }
  }

  /// Decodes the `relay` object of an APNs payload (`{"aps": …, "relay": {…}}`): the
  /// `call.incoming` event exactly as sockets get it, or `{"type": "call.cancelled",
  /// callId, reason}`. Nil for anything else (another sender's push).
  public static func decode(relay object: JSONObject) -> RelayPush? {
    switch object.str("type") {
    case "call.incoming":
      return Decoding.incomingCall(object).map(RelayPush.incomingCall)
    case "call.cancelled":
      guard let id = object.str("callId"), !id.isEmpty else { return nil }
      return .callCancelled(callID: id, reason: CallCancelReason(rawValue: object.str("reason") ?? "") ?? .cancelled)
    default:
      return nil
    }
  }

  /// Decodes an FCM data message (`RemoteMessage.data`, §9a): every field of the
  /// event as a string, plus `type`. Object and array fields (`from`, `to`,
  /// `metadata`) are their JSON text, `expiresAt` decimal digits.
  public static func decode(fcmData data: [String: String]) -> RelayPush? {
    var object = JSONObject()
    for key in data.keys.sorted() {
      guard let text = data[key] else { continue }
      object.append(key, fieldValue(key, text))
    }
    return decode(relay: object)
  }

  /// One FCM data field back as the JSON value it stood for in the event.
  static func fieldValue(_ key: String, _ text: String) -> JSONValue {
    switch key {
    case "from", "to", "metadata":
      return (try? JSONParser.parse(text)) ?? .string(text)
    case "expiresAt":
      return Int64(text).map { .number(JSONNumber($0)) } ?? .string(text)
    default:
      return .string(text)
    }
  }
}
