// The relay's HTTP API for apps whose socket is not up (protocol/ §9 call actions,
// §9a push devices): requests as method, path and body, answers decoded into the
// SDK's `Call` and `RelayError`. The shell (`RelayHTTPAPI`) only moves the bytes.

public import RelayProtocol
import RelayPrimitives

/// One request of the HTTP API, before it meets a transport.
public struct HTTPAction: Sendable, Equatable {
  /// `GET`, `PUT`, `POST` or `DELETE`.
  public var method: String
  /// Absolute path, percent-encoded (`/v1/calls/…/accept`).
  public var path: String
  /// JSON body; empty for none.
  public var body: [UInt8]

  /// `PUT /v1/push/devices/{device}` `{token, kind, environment?}` → 204 (§9a).
  public static func registerPushToken(_ token: String, kind: PushKind, environment: PushEnvironment, device: String)
    -> HTTPAction
  {
    var w = JSONWriter()
    w.beginObject()
    w.field("token", token)
    w.field("kind", kind.rawValue)
    if kind.isAPNs { w.field("environment", environment.rawValue) }
    w.endObject()
    return HTTPAction(method: "PUT", path: "/v1/push/devices/" + escape(device), body: w.bytes)
  }

  /// `DELETE /v1/push/devices/{device}` → 204 (§9a): the device's tokens are gone.
  public static func unregisterPushTokens(device: String) -> HTTPAction {
    HTTPAction(method: "DELETE", path: "/v1/push/devices/" + escape(device), body: [])
  }

  /// `GET /v1/calls/{callId}` → the call object (§9).
  public static func call(_ callID: String) -> HTTPAction {
    HTTPAction(method: "GET", path: "/v1/calls/" + escape(callID), body: [])
  }

  /// `POST /v1/calls/{callId}/accept|reject|cancel` (§9); `reason` only for reject.
  public static func callAction(_ verb: String, _ callID: String, reason: String? = nil) -> HTTPAction {
    var body: [UInt8] = []
    if let reason {
      var w = JSONWriter()
      w.beginObject()
      w.field("reason", reason)
      w.endObject()
      body = w.bytes
    }
    return HTTPAction(method: "POST", path: "/v1/calls/\(escape(callID))/\(verb)", body: body)
  }

  /// Percent-encodes everything but RFC 3986 unreserved characters and ":" / "@"
  /// (`pchar`, §3.3), so an id is always one path segment, and a valid device id
  /// (`[A-Za-z0-9._:-]`) goes as it is: the relay matches the segment verbatim.
  static func escape(_ segment: String) -> String {
    var out = ""
    for b in segment.utf8 {
      let unreserved =
        (b >= 0x30 && b <= 0x39) || (b >= 0x41 && b <= 0x5A) || (b >= 0x61 && b <= 0x7A)
        || b == UInt8(ascii: "-") || b == UInt8(ascii: ".") || b == UInt8(ascii: "_") || b == UInt8(ascii: "~")
        || b == UInt8(ascii: ":") || b == UInt8(ascii: "@")
      if unreserved {
        out.unicodeScalars.append(Unicode.Scalar(b))
      } else {
        out += "%" + Hex.encode([b]).uppercased()
      }
    }
    return out
  }
}

/// Answers of the HTTP API.
public enum HTTPAnswer {
  /// The failure a non-2xx answer stands for: the body's `code` (protocol/
  /// `schema/http/error.json`) when there is one, else the status's usual meaning
  /// (401 → `unauthorized`: a missing, expired or dev-mode token).
  public static func error(status: Int, body: [UInt8]) -> RelayError {
    let object = (try? JSONParser.parse(body))?.objectValue
    let message = object?.str("message") ?? "HTTP \(status)"
    if let code = object?.str("code") ?? object?.str("error") {
      return .server(code: RelayErrorCode(rawValue: code), message: message)
    }
    let code: RelayErrorCode
    switch status {
    case 400: code = .badRequest
    case 401: code = .unauthorized
    case 403: code = .forbidden
    case 404: code = .notFound
    case 409: code = .conflict
    case 429: code = .rateLimited
    case 503: code = .unavailable
    default: code = .internal
    }
    return .server(code: code, message: message)
  }

  /// The call object `{callId, sessionId, from, to, callType, metadata?, expiresAt,
  /// state, callees}` (§9) as a `Call`; `selfUID` (the token's user) tells the
  /// direction. Nil when the body is not a call object.
  public static func call(_ body: [UInt8], selfUID: String?) -> Call? {
    guard let object = (try? JSONParser.parse(body))?.objectValue, var call = Decoding.incomingCall(object) else {
      return nil
    }
    if let selfUID, call.from.uid == selfUID { call.direction = .outgoing }
    call.status = CallStatus(rawValue: object.str("state") ?? "") ?? .ringing
    for member in object["callees"]?.objectValue?.members ?? [] {
      if let state = member.value.stringValue { call.callees[member.key] = state }
    }
    return call
  }

  /// The `sub` claim of a JWT (RFC 7519 §4.1.2), read without verifying it: only to
  /// tell the caller's side of a call from a callee's. Nil for anything else.
  public static func subject(ofToken token: String) -> String? {
    let parts = token.split(separator: ".", omittingEmptySubsequences: false)
    guard parts.count == 3, let payload = Base64URL.decode(parts[1]),
      let claims = (try? JSONParser.parse(payload))?.objectValue
    else { return nil }
    return claims.str("sub")
  }
}
