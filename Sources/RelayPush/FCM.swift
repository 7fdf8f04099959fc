// Firebase Cloud Messaging HTTP v1 (PROTOCOL.md §9a): data-only, high-priority
// messages, authorised by an OAuth2 access token a service account obtains with a
// signed assertion (RFC 7523 §2.1).
public import RelayCore
import RelayPrimitives
public import RelayProtocol

/// The parts of a Google service-account JSON file the relay uses.
public struct FCMCredentials: Sendable, Equatable {
  public let projectId: String
  public let clientEmail: String
  /// PEM, RSA (RS256).
  public let privateKey: String
  public let tokenURI: String

  public init(projectId: String, clientEmail: String, privateKey: String, tokenURI: String) {
    self.projectId = projectId
    self.clientEmail = clientEmail
    self.privateKey = privateKey
    self.tokenURI = tokenURI
  }

  /// Reads the file's JSON; the reason when a field is missing or not a string.
  public static func parse(_ bytes: [UInt8]) -> Result<FCMCredentials, PushSettingError> {
    guard let object = (try? JSONParser.parse(bytes))?.objectValue else {
      return .failure(PushSettingError("not a JSON object"))
    }
    var values: [String] = []
    for name in ["project_id", "client_email", "private_key", "token_uri"] {
      guard let value = object[name]?.stringValue, !value.isEmpty else {
        return .failure(PushSettingError("\(name) missing or not a string"))
      }
      values.append(value)
    }
    return .success(FCMCredentials(projectId: values[0], clientEmail: values[1], privateKey: values[2], tokenURI: values[3]))
  }
}

/// A push setting that cannot work (exit 64 at start, §9a).
public struct PushSettingError: Error, Sendable, Equatable, CustomStringConvertible {
  public let description: String
  public init(_ description: String) { self.description = description }
}

public enum FCM {
  /// The scope of the send API.
  public static let scope = "https://www.googleapis.com/auth/firebase.messaging"
  /// Lifetime of the assertion; Google accepts at most an hour.
  public static let assertionLifetimeSeconds: Int64 = 3600
  /// TTL of a follow-up (`call.cancelled`) for a phone that is off: an hour; after
  /// that the app learns how the call ended from its socket.
  public static let followUpTTLSeconds: Int64 = 3600

  /// `POST <base>/v1/projects/<project>/messages:send`. A ring's `android.ttl` is the
  /// time left to `expiresAt` (rounded up to whole seconds, at least 0); its `data`
  /// holds every member of the `call.incoming` event as a string (FCM data values
  /// must be strings: objects and numbers as their JSON text).
  public static func request(
    _ job: PushJob, baseURL: String, projectId: String, accessToken: String, nowWallMs: Int64
  ) -> PushRequest {
    var writer = JSONWriter()
    writer.beginObject()
    writer.key("message")
    writer.beginObject()
    writer.field("token", job.target.token)
    writer.key("android")
    writer.beginObject()
    writer.field("priority", "HIGH")
    switch job.message {
    case .ring(let event):
      let left = max(job.expiresAtWallMs - nowWallMs, 0)
      writer.field("ttl", String((left + 999) / 1000) + "s")
      writer.endObject()
      writeData(&writer, event: event.bytes)
    case .ended(let reason):
      writer.field("ttl", String(followUpTTLSeconds) + "s")
      writer.endObject()
      writer.key("data")
      writer.beginObject()
      writer.field("type", "call.cancelled")
      writer.field("callId", job.callId)
      writer.field("reason", reason)
      writer.endObject()
    }
    writer.endObject()
    writer.endObject()
    return PushRequest(
      url: APNs.trimmedBase(baseURL) + "/v1/projects/" + projectId + "/messages:send",
      headers: [.init("authorization", "Bearer " + accessToken), .init("content-type", "application/json")],
      body: writer.bytes)
  }

  /// `data`: each event member as a string, `type` first and always `call.incoming`.
  static func writeData(_ writer: inout JSONWriter, event: [UInt8]) {
    writer.key("data")
    writer.beginObject()
    writer.field("type", "call.incoming")
    for (name, value) in (try? JSONParser.parse(event))?.objectValue?.members ?? [] where name != "type" {
      writer.key(name)
      if case .string(let text) = value { writer.string(text) } else { writer.string(String(decoding: value.encoded(), as: UTF8.self)) }
    }
    writer.endObject()
  }

  /// What an FCM answer means (Firebase, "FCM HTTP v1 error codes"): 404
  /// `UNREGISTERED`, or 400 `INVALID_ARGUMENT` naming the token, removes it.
  public static func outcome(status: Int, headers: [(String, String)], body: [UInt8]) -> PushOutcome {
    if (200...299).contains(status) { return .sent }
    let error = (try? JSONParser.parse(body))?["error"]
    let details = error?["details"]?.arrayValue ?? []
    let codes = details.compactMap { $0["errorCode"]?.stringValue }
    let reason = codes.first ?? error?["status"]?.stringValue ?? "HTTP \(status)"
    if codes.contains("UNREGISTERED") || (status == 404 && reason == "NOT_FOUND") {
      return .tokenGone(reason: "UNREGISTERED")
    }
    if status == 400 && namesToken(error: error, details: details) { return .tokenGone(reason: reason) }
    if status == 401 { return .renewCredentials(reason: reason) }
    if Answer.isTransient(status) { return .retry(reason: reason, afterMs: Answer.retryAfterMs(headers)) }
    return .failed(reason: reason)
  }

  /// A 400 about the token itself: a `BadRequest` field violation on
  /// `message.token`, or a message that names the registration token.
  static func namesToken(error: JSONValue?, details: [JSONValue]) -> Bool {
    for detail in details {
      for violation in detail["fieldViolations"]?.arrayValue ?? [] where violation["field"]?.stringValue == "message.token" {
        return true
      }
    }
    return error?["message"]?.stringValue?.lowercased().contains("registration token") ?? false
  }

  /// The OAuth2 token request (RFC 7523 §2.1): `assertion` is the signed JWT from
  /// `assertionParts`.
  public static func tokenRequest(_ credentials: FCMCredentials, assertion: String) -> PushRequest {
    let body = "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=" + assertion
    return PushRequest(
      url: credentials.tokenURI, headers: [.init("content-type", "application/x-www-form-urlencoded")],
      body: Array(body.utf8))
  }

  /// Header and claims of the assertion (Google, "Using OAuth 2.0 for server to
  /// server applications"): RS256, `iss` the service account, `aud` the token URI.
  public static func assertionParts(_ credentials: FCMCredentials, nowWallMs: Int64) -> (header: JSONObject, claims: JSONObject) {
    var header = JSONObject()
    header.append("alg", .string("RS256"))
    header.append("typ", .string("JWT"))
    let now = nowWallMs / 1000
    var claims = JSONObject()
    claims.append("iss", .string(credentials.clientEmail))
    claims.append("scope", .string(scope))
    claims.append("aud", .string(credentials.tokenURI))
    claims.append("iat", .number(JSONNumber(now)))
    claims.append("exp", .number(JSONNumber(now + assertionLifetimeSeconds)))
    return (header, claims)
  }

  /// `{access_token, expires_in}` of a token answer; nil when either is missing.
  public static func accessToken(from body: [UInt8]) -> (token: String, expiresInMs: Int64)? {
    guard let object = (try? JSONParser.parse(body))?.objectValue,
      let token = object["access_token"]?.stringValue, !token.isEmpty,
      let seconds = object["expires_in"]?.numberValue?.int64, seconds > 0
    else { return nil }
    return (token, min(seconds, 86_400) * 1000)
  }
}
