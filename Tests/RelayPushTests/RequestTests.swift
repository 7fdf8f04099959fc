import RelayCore
import RelayProtocol
import RelayPush
import Testing

let ringEvent = Array(
  #"{"type":"call.incoming","callId":"c1","sessionId":"s1","from":{"uid":"alice","name":"Alice"},"to":["bob"],"callType":"video","metadata":{"k":1},"expiresAt":1700000045000}"#
    .utf8)

func job(_ kind: PushKind, _ message: PushMessage, environment: PushEnvironment = .production) -> PushJob {
  PushJob(
    target: PushTarget(uid: "bob", device: "phone", token: "ab12", kind: kind, environment: environment),
    callId: "c1", sessionId: "s1", callerUid: "alice", callerName: "Alice", callType: "video",
    expiresAtWallMs: 1_700_000_045_000, message: message)
}

func object(_ bytes: [UInt8]) throws -> JSONValue { try JSONParser.parse(bytes) }

let settings = APNsSettings(keyId: "KEY", teamId: "TEAM", topic: "com.example.app", productionURL: "https://prod/", sandboxURL: "https://sandbox")

@Suite("RelayPush: APNs requests (§9a)")
struct APNsRequestTests {
  @Test("a VoIP ring: voip type, <topic>.voip, priority 10, expiration = expiresAt s, collapse id, {relay: event}")
  func voipRing() throws {
    let request = APNs.request(job(.apnsVoip, .ring(event: Payload(ringEvent))), settings: settings, bearer: "JWT")
    #expect(request.method == "POST")
    #expect(request.url == "https://prod/3/device/ab12")
    #expect(request.header("authorization") == "bearer JWT")
    #expect(request.header("apns-push-type") == "voip")
    #expect(request.header("apns-topic") == "com.example.app.voip")
    #expect(request.header("apns-priority") == "10")
    #expect(request.header("apns-expiration") == "1700000045")
    #expect(request.header("apns-collapse-id") == "c1")
    #expect(request.body == Array(#"{"relay":"#.utf8) + ringEvent + Array("}".utf8))
    #expect(request.headers.allSatisfy { $0.name == $0.name.lowercased() })
  }

  @Test("sandbox tokens go to the sandbox URL")
  func sandbox() {
    let request = APNs.request(job(.apnsVoip, .ring(event: Payload(ringEvent)), environment: .sandbox), settings: settings, bearer: "J")
    #expect(request.url == "https://sandbox/3/device/ab12")
  }

  @Test("an alert token's ring: alert type, bare topic, RELAY_INCOMING_CALL with the caller's name, the same relay object")
  func alertRing() throws {
    let request = APNs.request(job(.apns, .ring(event: Payload(ringEvent))), settings: settings, bearer: "J")
    #expect(request.header("apns-push-type") == "alert")
    #expect(request.header("apns-topic") == "com.example.app")
    #expect(request.header("apns-collapse-id") == "c1")
    let body = try object(request.body)
    #expect(body["aps"]?["alert"]?["loc-key"] == .string("RELAY_INCOMING_CALL"))
    #expect(body["aps"]?["alert"]?["loc-args"] == .array([.string("Alice")]))
    #expect(body["relay"] == (try object(ringEvent)))
  }

  @Test("ringing ended: a missed-call alert to the alert token, kept a day past expiresAt")
  func missedCall() throws {
    do {
      let request = APNs.request(job(.apns, .ended(reason: "unanswered")), settings: settings, bearer: "J")
      #expect(request.header("apns-push-type") == "alert")
      #expect(request.header("apns-topic") == "com.example.app")
      #expect(request.header("apns-collapse-id") == "c1")
      #expect(request.header("apns-priority") == "10")
      #expect(request.header("apns-expiration") == String(1_700_000_045 + 86_400))
      let body = try object(request.body)
      #expect(body["aps"]?["alert"]?["loc-key"] == .string("RELAY_MISSED_CALL"))
      #expect(body["aps"]?["alert"]?["loc-args"] == .array([.string("Alice")]))
      #expect(body["relay"] == (try object(Array(#"{"type":"call.cancelled","callId":"c1","reason":"unanswered"}"#.utf8))))
    }
  }

  @Test("answers: 2xx sent; 410 and bad tokens gone; expired provider token renews; 429/5xx retried; others failed")
  func outcomes() {
    func outcome(_ status: Int, _ reason: String = "", headers: [(String, String)] = []) -> PushOutcome {
      APNs.outcome(status: status, headers: headers, body: Array(#"{"reason":"\#(reason)"}"#.utf8))
    }
    #expect(APNs.outcome(status: 200, headers: [], body: []) == .sent)
    #expect(outcome(410, "Unregistered") == .tokenGone(reason: "Unregistered"))
    #expect(outcome(400, "BadDeviceToken") == .tokenGone(reason: "BadDeviceToken"))
    #expect(outcome(400, "DeviceTokenNotForTopic") == .tokenGone(reason: "DeviceTokenNotForTopic"))
    #expect(outcome(400, "BadTopic") == .failed(reason: "BadTopic"))
    #expect(outcome(403, "ExpiredProviderToken") == .renewCredentials(reason: "ExpiredProviderToken"))
    #expect(outcome(403, "InvalidProviderToken") == .failed(reason: "InvalidProviderToken"))
    #expect(outcome(429, "TooManyRequests", headers: [("Retry-After", "3")]) == .retry(reason: "TooManyRequests", afterMs: 3000))
    #expect(outcome(500, "InternalServerError") == .retry(reason: "InternalServerError", afterMs: nil))
    #expect(outcome(503, "ServiceUnavailable", headers: [("retry-after", "Wed, 21 Oct 2015 07:28:00 GMT")])
      == .retry(reason: "ServiceUnavailable", afterMs: nil))
    #expect(APNs.outcome(status: 502, headers: [], body: Array("<html>".utf8)) == .retry(reason: "HTTP 502", afterMs: nil))
  }
}

@Suite("RelayPush: FCM requests (§9a)")
struct FCMRequestTests {
  @Test("a ring: messages:send, HIGH, ttl = time left rounded up, data = every event field as a string")
  func ring() throws {
    let request = FCM.request(
      job(.fcm, .ring(event: Payload(ringEvent))), baseURL: "https://fcm/", projectId: "proj", accessToken: "ya29",
      nowWallMs: 1_700_000_000_001)
    #expect(request.url == "https://fcm/v1/projects/proj/messages:send")
    #expect(request.header("authorization") == "Bearer ya29")
    let message = try #require(try object(request.body)["message"])
    #expect(message["token"] == .string("ab12"))
    #expect(message["android"]?["priority"] == .string("HIGH"))
    #expect(message["android"]?["ttl"] == .string("45s"))
    let data = try #require(message["data"]?.objectValue)
    #expect(data.members.allSatisfy { $0.value.stringValue != nil })
    #expect(data["type"] == .string("call.incoming"))
    #expect(data["callId"] == .string("c1"))
    #expect(data["sessionId"] == .string("s1"))
    #expect(data["callType"] == .string("video"))
    #expect(data["expiresAt"] == .string("1700000045000"))
    #expect(data["from"] == .string(#"{"uid":"alice","name":"Alice"}"#))
    #expect(data["to"] == .string(#"["bob"]"#))
    #expect(data["metadata"] == .string(#"{"k":1}"#))
    #expect(message["notification"] == nil)  // data only
  }

  @Test("a ring already past expiresAt gets ttl 0s; a follow-up is a data message with type call.cancelled")
  func expiredAndEnded() throws {
    let late = FCM.request(
      job(.fcm, .ring(event: Payload(ringEvent))), baseURL: "https://fcm", projectId: "p", accessToken: "t",
      nowWallMs: 1_800_000_000_000)
    #expect(try object(late.body)["message"]?["android"]?["ttl"] == .string("0s"))
    let ended = FCM.request(job(.fcm, .ended(reason: "answered_elsewhere")), baseURL: "https://fcm", projectId: "p", accessToken: "t", nowWallMs: 0)
    let message = try object(ended.body)["message"]
    #expect(message?["android"]?["priority"] == .string("HIGH"))
    #expect(message?["data"] == (try object(Array(#"{"type":"call.cancelled","callId":"c1","reason":"answered_elsewhere"}"#.utf8))))
  }

  @Test("answers: UNREGISTERED and 400 on the token remove it; 401 renews; 429/503 retried; other 400 failed")
  func outcomes() {
    func answer(_ status: Int, _ body: String, headers: [(String, String)] = []) -> PushOutcome {
      FCM.outcome(status: status, headers: headers, body: Array(body.utf8))
    }
    #expect(answer(200, #"{"name":"projects/p/messages/1"}"#) == .sent)
    let unregistered = #"{"error":{"code":404,"status":"NOT_FOUND","details":[{"@type":"type.googleapis.com/google.firebase.fcm.v1.FcmError","errorCode":"UNREGISTERED"}]}}"#
    #expect(answer(404, unregistered) == .tokenGone(reason: "UNREGISTERED"))
    let badToken = #"{"error":{"code":400,"message":"The registration token is not a valid FCM registration token","status":"INVALID_ARGUMENT","details":[{"errorCode":"INVALID_ARGUMENT"},{"fieldViolations":[{"field":"message.token"}]}]}}"#
    #expect(answer(400, badToken) == .tokenGone(reason: "INVALID_ARGUMENT"))
    let badTTL = #"{"error":{"code":400,"message":"Invalid value at 'message.android.ttl'","status":"INVALID_ARGUMENT"}}"#
    #expect(answer(400, badTTL) == .failed(reason: "INVALID_ARGUMENT"))
    #expect(answer(401, #"{"error":{"status":"UNAUTHENTICATED"}}"#) == .renewCredentials(reason: "UNAUTHENTICATED"))
    #expect(answer(429, #"{"error":{"status":"RESOURCE_EXHAUSTED"}}"#, headers: [("retry-after", "7")])
      == .retry(reason: "RESOURCE_EXHAUSTED", afterMs: 7000))
    #expect(answer(503, "") == .retry(reason: "HTTP 503", afterMs: nil))
    #expect(answer(403, #"{"error":{"status":"PERMISSION_DENIED","details":[{"errorCode":"SENDER_ID_MISMATCH"}]}}"#)
      == .failed(reason: "SENDER_ID_MISMATCH"))
  }

  @Test("service-account JSON: the four fields used, a clear reason for anything missing")
  func credentials() {
    let good = #"{"type":"service_account","project_id":"p","client_email":"a@p.iam","private_key":"PEM","token_uri":"https://oauth2/token"}"#
    #expect(FCMCredentials.parse(Array(good.utf8)) == .success(FCMCredentials(projectId: "p", clientEmail: "a@p.iam", privateKey: "PEM", tokenURI: "https://oauth2/token")))
    #expect(FCMCredentials.parse(Array("[]".utf8)) == .failure(PushSettingError("not a JSON object")))
    #expect(FCMCredentials.parse(Array(#"{"project_id":"p","client_email":"e","private_key":7,"token_uri":"u"}"#.utf8))
      == .failure(PushSettingError("private_key missing or not a string")))
  }

  @Test("the OAuth exchange: RS256 assertion claims, jwt-bearer form body, access token parsing")
  func oauth() throws {
    let credentials = FCMCredentials(projectId: "p", clientEmail: "a@p.iam", privateKey: "", tokenURI: "https://oauth2/token")
    let (header, claims) = FCM.assertionParts(credentials, nowWallMs: 1_700_000_000_999)
    #expect(header["alg"] == .string("RS256"))
    #expect(claims["iss"] == .string("a@p.iam"))
    #expect(claims["aud"] == .string("https://oauth2/token"))
    #expect(claims["scope"] == .string("https://www.googleapis.com/auth/firebase.messaging"))
    #expect(claims["iat"]?.numberValue?.int64 == 1_700_000_000)
    #expect(claims["exp"]?.numberValue?.int64 == 1_700_003_600)
    let request = FCM.tokenRequest(credentials, assertion: "a.b.c")
    #expect(request.url == "https://oauth2/token")
    #expect(String(decoding: request.body, as: UTF8.self) == "grant_type=urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Ajwt-bearer&assertion=a.b.c")
    #expect(request.header("content-type") == "application/x-www-form-urlencoded")
    #expect(FCM.accessToken(from: Array(#"{"access_token":"ya29","expires_in":3599,"token_type":"Bearer"}"#.utf8))! == ("ya29", 3_599_000))
    #expect(FCM.accessToken(from: Array(#"{"access_token":"ya29"}"#.utf8)) == nil)
    #expect(FCM.accessToken(from: Array("nope".utf8)) == nil)
  }
}
