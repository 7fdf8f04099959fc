// Push on the client machine (protocol/ §4 hello.device, §9a): the device id in
// hello, the registration commands on the wire, the push payloads decoded into
// `Call`, and the HTTP API's requests and answers.

@testable import RelayClientCore
import RelayPrimitives
import RelayProtocol
import Testing

/// The `call.incoming` object of §9 as the relay sends it (and, in the VoIP push, as `relay`).
let incomingJSON =
  #"{"type":"call.incoming","callId":"call-7","sessionId":"sess-7","from":{"uid":"alice","name":"Alice","avatar":"https://a.example/alice.png"},"to":["bob","carol"],"callType":"video","metadata":{"topic":"standup","n":2},"expiresAt":1764260045000}"#

/// The call `incomingJSON` stands for, as the socket path decodes it.
let incomingCall = Call(
  id: "call-7", sessionID: "sess-7", direction: .incoming,
  from: CallUser(uid: "alice", name: "Alice", avatar: "https://a.example/alice.png"), to: ["bob", "carol"],
  callType: .video,
  metadata: JSONObject([("topic", .string("standup")), ("n", .number(JSONNumber(2)))]), expiresAt: 1_764_260_045_000)

@Suite struct DeviceHelloTests {
  @Test("hello carries the configured device next to the identity, also when resuming")
  func helloDevice() {
    var h = Harness()
    h.machine = ClientMachine(configuration: { () -> ClientConfiguration in
      var c = ClientConfiguration(auth: .dev(uid: "bob", name: "Bob"))
      c.device = "ios-bob.1"
      return c
    }(), seed: 1)
    h.connectAndWelcome()
    #expect(h.log.first { $0.sent?["type"]?.stringValue == "hello" }?.sent?["device"]?.stringValue == "ios-bob.1")
    h.run { m, now in m.transportClosed(code: 1006, reason: "", nowMs: now) }
    h.advance(1_000)
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["resume"] != nil)
    #expect(hello?["device"]?.stringValue == "ios-bob.1")
  }

  @Test("no device configured: hello has no device field")
  func noDevice() {
    var h = Harness()
    h.run { m, now in m.connect(nowMs: now) }
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello != nil)
    #expect(hello?["device"] == nil)
  }

  @Test("device ids: 1–128 bytes of [A-Za-z0-9._:-]")
  func validation() {
    for ok in ["a", "iPhone-15.A:b_c", String(repeating: "x", count: 128)] { #expect(DeviceID.isValid(ok), "\(ok)") }
    for bad in ["", String(repeating: "x", count: 129), "with space", "é", "a/b", "a\u{0}"] {
      #expect(!DeviceID.isValid(bad), "\(bad)")
    }
  }

  @Test("generated ids are valid, 32 hex digits, distinct, and fixed by the seed")
  func generation() {
    var a = SeededRandom(seed: 9)
    var b = SeededRandom(seed: 9)
    let first = DeviceID.generate(using: &a)
    #expect(first == DeviceID.generate(using: &b))
    #expect(first.utf8.count == 32 && DeviceID.isValid(first))
    #expect(first.allSatisfy { "0123456789abcdef".contains($0) })
    let many = Set((0..<200).map { _ in DeviceID.generate(using: &a) })
    #expect(many.count == 200)
  }

  @Test("PushKit's token bytes become lowercase hex")
  func apnsHex() {
    #expect(DeviceID.apnsToken([0x00, 0x0f, 0xa0, 0xff]) == "000fa0ff")
  }
}

@Suite struct PushCommandTests {
  @Test("push.register: token, kind, environment for APNs only, device when given")
  func register() throws {
    let voip = try JSONParser.parse(
      CommandEncoding.encode(
        .registerPushToken(token: "ab12", kind: .apnsVoip, environment: .sandbox, device: nil), id: "c1")
    ).objectValue
    #expect(voip == JSONObject([
      ("type", .string("push.register")), ("id", .string("c1")), ("token", .string("ab12")),
      ("kind", .string("apns-voip")), ("environment", .string("sandbox")),
    ]))
    let fcm = try JSONParser.parse(
      CommandEncoding.encode(.registerPushToken(token: "f:1", kind: .fcm, environment: .production, device: "d9"), id: "c2")
    ).objectValue
    #expect(fcm == JSONObject([
      ("type", .string("push.register")), ("id", .string("c2")), ("token", .string("f:1")),
      ("kind", .string("fcm")), ("device", .string("d9")),
    ]))
  }

  @Test("push.unregister: the token")
  func unregister() throws {
    let m = try JSONParser.parse(CommandEncoding.encode(.unregisterPushToken("ab12"), id: "c3")).objectValue
    #expect(m == JSONObject([("type", .string("push.unregister")), ("id", .string("c3")), ("token", .string("ab12"))]))
  }

  @Test("a registration issued while connecting waits for welcome, then its ok completes it")
  func queuedUntilWelcome() {
    var h = Harness()
    h.run { m, now in m.connect(nowMs: now) }
    let early = h.run { m, now in
      m.command(.registerPushToken(token: "t", kind: .fcm, environment: .production, device: nil), requestID: 5, nowMs: now)
    }
    #expect(early.isEmpty)
    h.run { m, now in m.transportOpened(nowMs: now) }
    let sent = h.server(h.welcome(resumed: false))
    #expect(sent.sentTypes == ["push.register"])
    let reply = h.server(#"{"type":"ok","re":"c1"}"#)
    #expect(reply == [.reply(requestID: 5, .success(JSONObject([("type", .string("ok")), ("re", .string("c1"))])))])
  }
}

@Suite struct PushedCountTests {
  @Test("call.ringing / call.offline `pushed` is kept per callee on the outgoing call")
  func pushedPerCallee() {
    var h = Harness()
    h.connectAndWelcome()
    let initiate = h.run { m, now in
      m.command(.initiateCall(to: ["carol", "dave"], callType: .audio, metadata: nil), requestID: 1, nowMs: now)
    }
    let id = initiate.first?.sent?["id"]?.stringValue ?? ""
    h.server(#"{"type":"ok","re":"\#(id)","callId":"k2","sessionId":"s2"}"#)
    h.server(#"{"type":"call.ringing","callId":"k2","uid":"carol","pushed":1}"#)
    h.server(#"{"type":"call.offline","callId":"k2","uid":"dave","pushed":2}"#)
    let call = h.machine.snapshot.calls["k2"]
    #expect(call?.pushed == ["carol": 1, "dave": 2])
    #expect(call?.callees == ["carol": "ringing", "dave": "offline"])
    #expect(call?.status == .ringing)
  }
}

@Suite struct PushPayloadTests {
  @Test("the VoIP push's relay object is the call the socket would give")
  func incomingFromRelayObject() throws {
    let object = try #require(try JSONParser.parse(incomingJSON).objectValue)
    #expect(RelayPush.decode(relay: object) == .incomingCall(incomingCall))
    // The socket path decodes the same bytes to the same call.
    var h = Harness()
    h.connectAndWelcome()
    #expect(h.server(incomingJSON).events == [.incomingCall(incomingCall)])
  }

  @Test("the follow-up: call.cancelled with each reason; unknown reasons read as cancelled")
  func cancelled() throws {
    for reason in ["cancelled", "unanswered", "answered_elsewhere", "rejected_elsewhere", "caller_timed_out"] {
      let object = try #require(
        try JSONParser.parse(#"{"type":"call.cancelled","callId":"call-7","reason":"\#(reason)"}"#).objectValue)
      #expect(RelayPush.decode(relay: object) == .callCancelled(callID: "call-7", reason: CallCancelReason(rawValue: reason)!))
    }
    let odd = try #require(try JSONParser.parse(#"{"type":"call.cancelled","callId":"c","reason":"new"}"#).objectValue)
    #expect(RelayPush.decode(relay: odd) == .callCancelled(callID: "c", reason: .cancelled))
  }

  @Test("anything else is not a relay push", arguments: [
    #"{"type":"message"}"#, #"{"callId":"c"}"#, #"{"type":"call.incoming","callId":"c"}"#,
    #"{"type":"call.cancelled"}"#, #"{"type":"call.incoming","from":{"uid":"a"}}"#,
  ])
  func foreign(json: String) throws {
    let object = try #require(try JSONParser.parse(json).objectValue)
    #expect(RelayPush.decode(relay: object) == nil)
  }

  @Test("FCM data: every field a string, objects as JSON text, expiresAt digits")
  func fcmIncoming() {
    let data = [
      "type": "call.incoming", "callId": "call-7", "sessionId": "sess-7",
      "from": #"{"uid":"alice","name":"Alice","avatar":"https://a.example/alice.png"}"#, "to": #"["bob","carol"]"#,
      "callType": "video", "metadata": #"{"topic":"standup","n":2}"#, "expiresAt": "1764260045000",
    ]
    let decoded = RelayPush.decode(fcmData: data)
    guard case .incomingCall(let call) = decoded else {
      Issue.record("not an incoming call: \(String(describing: decoded))")
      return
    }
    #expect(call.id == incomingCall.id && call.sessionID == incomingCall.sessionID && call.from == incomingCall.from)
    #expect(call.to == incomingCall.to && call.callType == .video && call.expiresAt == incomingCall.expiresAt)
    #expect(call.metadata?["topic"] == .string("standup") && call.metadata?["n"]?.numberValue?.int64 == 2)
    #expect(RelayPush.decode(fcmData: ["type": "call.cancelled", "callId": "call-7", "reason": "answered_elsewhere"])
      == .callCancelled(callID: "call-7", reason: .answeredElsewhere))
    #expect(RelayPush.decode(fcmData: ["title": "Sale!"]) == nil)
  }
}

@Suite struct HTTPActionTests {
  @Test("push devices: PUT with the token, DELETE without a body; ids stay one path segment")
  func pushDevices() throws {
    let put = HTTPAction.registerPushToken("ab12", kind: .apnsVoip, environment: .production, device: "d:1")
    #expect(put.method == "PUT" && put.path == "/v1/push/devices/d:1", "a device id is sent verbatim")
    #expect(try JSONParser.parse(put.body).objectValue == JSONObject([
      ("token", .string("ab12")), ("kind", .string("apns-voip")), ("environment", .string("production")),
    ]))
    let fcm = HTTPAction.registerPushToken("f", kind: .fcm, environment: .sandbox, device: "d")
    #expect(try JSONParser.parse(fcm.body).objectValue?["environment"] == nil)
    #expect(HTTPAction.unregisterPushTokens(device: "d") == HTTPAction(method: "DELETE", path: "/v1/push/devices/d", body: []))
    #expect(HTTPAction.call("a/b?c#d e").path == "/v1/calls/a%2Fb%3Fc%23d%20e")
  }

  @Test("call actions: POST accept and cancel without a body, reject with its reason")
  func callActions() throws {
    #expect(HTTPAction.callAction("accept", "k") == HTTPAction(method: "POST", path: "/v1/calls/k/accept", body: []))
    let reject = HTTPAction.callAction("reject", "k", reason: "busy")
    #expect(reject.path == "/v1/calls/k/reject")
    #expect(try JSONParser.parse(reject.body).objectValue == JSONObject([("reason", .string("busy"))]))
  }

  @Test("the call object decodes with state, callees and the token user's side")
  func callObject() {
    let body = Array(
      #"{"callId":"k","sessionId":"s","from":{"uid":"alice","name":"Alice"},"to":["bob"],"callType":"audio","expiresAt":5,"state":"accepted","callees":{"bob":"accepted"}}"#
        .utf8)
    let asBob = HTTPAnswer.call(body, selfUID: "bob")
    #expect(asBob?.direction == .incoming && asBob?.status == .accepted && asBob?.callees == ["bob": "accepted"])
    #expect(HTTPAnswer.call(body, selfUID: "alice")?.direction == .outgoing)
    #expect(HTTPAnswer.call(Array("not json".utf8), selfUID: nil) == nil)
  }

  @Test("errors: the body's code, else the status's meaning")
  func errors() {
    let conflict = Array(#"{"type":"error","code":"conflict","message":"already rejected","error":"conflict"}"#.utf8)
    #expect(HTTPAnswer.error(status: 409, body: conflict) == .server(code: .conflict, message: "already rejected"))
    #expect(HTTPAnswer.error(status: 401, body: []).code == .unauthorized)
    #expect(HTTPAnswer.error(status: 404, body: Array("not found".utf8)).code == .notFound)
    #expect(HTTPAnswer.error(status: 500, body: []).code == .internal)
  }

  @Test("the token's sub, read without verifying; nil for non-JWTs")
  func subject() {
    let payload = Base64URL.encode(Array(#"{"sub":"bob","exp":1}"#.utf8))
    #expect(HTTPAnswer.subject(ofToken: "eyJhbGciOiJIUzI1NiJ9.\(payload).sig") == "bob")
    #expect(HTTPAnswer.subject(ofToken: "nope") == nil)
    #expect(HTTPAnswer.subject(ofToken: "a.!!.c") == nil)
  }
}
