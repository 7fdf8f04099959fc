// Push registration and the woken-app flow against the real relay (protocol/ §4
// hello.device, §9 HTTP call actions, §9a): over the socket, over HTTP with the
// user token, and "report to CallKit, then accept over HTTP" before any socket.

import Foundation
import Testing

@testable import RelayClient

@Suite(.serialized) struct PushLiveTests {
  static let secret = "push-live-secret-0123456789"
  /// A PushKit token as PushKit hands it: 32 bytes.
  static let voipToken = Data((0..<32).map { UInt8($0 * 7 & 0xff) })

  func client(_ relay: RelayProcess, _ auth: RelayAuth, device: DeviceIdentity) -> (RelayClient, Recorder) {
    var options = RelayClientOptions()
    options.device = device
    let client = RelayClient(url: relay.url, auth: auth, options: options)
    let recorder = Recorder()
    client.addCallListener(id: "r", recorder)
    client.addSessionStatusListener(id: "r", recorder)
    return (client, recorder)
  }

  @Test("push.register over the socket: hex from Data, FCM text, bad tokens refused, unregister")
  func socketRegistration() async throws {
    let relay = try RelayProcess([])
    let (phone, _) = client(relay, dev("bob"), device: .fixed("bob-phone.1"))
    try await phone.connect()
    try await phone.registerPushToken(Self.voipToken, kind: .apnsVoip, environment: .sandbox)
    try await phone.registerPushToken("fcm:registration-token_1", kind: .fcm)
    for (token, kind) in [("zz", PushKind.apns), ("abc", .apnsVoip), ("", .fcm)] {
      do {
        try await phone.registerPushToken(token, kind: kind)
        Issue.record("\(kind.rawValue) token \(token) accepted")
      } catch {
        #expect(error.code == .badRequest, "\(error)")
      }
    }
    try await phone.unregisterPushToken(Self.voipToken)
    try await phone.unregisterPushToken("fcm:registration-token_1")

    // §9a: no device in the command and none in hello → bad_request.
    let (anonymous, _) = client(relay, dev("carol"), device: .none)
    try await anonymous.connect()
    do {
      try await anonymous.registerPushToken(Self.voipToken, kind: .apnsVoip)
      Issue.record("registered without a device")
    } catch {
      #expect(error.code == .badRequest)
    }
    phone.disconnect()
    anonymous.disconnect()
    relay.stop()
  }

  @Test("PUT and DELETE /v1/push/devices/{device} with the user token")
  func httpRegistration() async throws {
    try await FoundationNetworkingGate.exclusive { try await httpRegistrationBody() }
  }

  private func httpRegistrationBody() async throws {
    let relay = try RelayProcess(["--secret", Self.secret])
    let jwt = try RelayProcess.token(secret: Self.secret, sub: "bob", name: "Bob")
    let api = RelayHTTPAPI(relayURL: relay.url, token: jwt, device: "bob:phone_1.a-b")  // every allowed character
    #expect(api.baseURL.absoluteString == "http://localhost:\(relay.port)")
    try await api.registerPushToken(Self.voipToken, kind: .apnsVoip)
    try await api.registerPushToken("fcm-token", kind: .fcm)
    do {
      try await api.registerPushToken("not hex", kind: .apns)
      Issue.record("a bad APNs token was accepted")
    } catch {
      #expect(error.code == .badRequest)
    }
    try await api.unregisterPushTokens()

    var stranger = api
    stranger.token = "not-a-jwt"
    do {
      try await stranger.registerPushToken(Self.voipToken, kind: .apnsVoip)
      Issue.record("accepted without a valid token")
    } catch {
      #expect(error.code == .unauthorized)
    }
    var deviceless = api
    deviceless.device = nil
    do {
      try await deviceless.registerPushToken(Self.voipToken, kind: .apnsVoip)
      Issue.record("registered without a device")
    } catch {
      #expect(error.code == .badRequest)
    }
    relay.stop()
  }

  @Test("woken by a push: read the call, accept over HTTP before any socket, then connect and join")
  func acceptOverHTTP() async throws {
    try await FoundationNetworkingGate.exclusive { try await acceptOverHTTPBody() }
  }

  private func acceptOverHTTPBody() async throws {
    let relay = try RelayProcess(["--secret", Self.secret, "--ring-timeout", "20000"])
    let aliceJWT = try RelayProcess.token(secret: Self.secret, sub: "alice", name: "Alice")
    let bobJWT = try RelayProcess.token(secret: Self.secret, sub: "bob", name: "Bob")
    let (alice, ra) = client(relay, .token(aliceJWT), device: .fixed("alice-laptop"))
    try await alice.connect()
    let ringing = try await alice.initiateCall(to: ["bob"], callType: .video)

    // Bob's app, woken: no socket; the push said which call (the payload is decoded
    // by RelayPush, tested without a relay).
    let (bob, rb) = client(relay, .token(bobJWT), device: .fixed("bob-phone.1"))
    let seen = try await bob.http.call(ringing.id)
    #expect(seen.direction == .incoming && seen.status == .ringing && seen.from.uid == "alice")
    #expect(seen.callees == ["bob": "ringing"] && seen.sessionID == ringing.sessionID)
    let accepted = try await bob.http.acceptCall(callID: ringing.id)
    #expect(accepted.status == .accepted)
    #expect(try await bob.http.acceptCall(callID: ringing.id) == accepted, "idempotent (§9)")
    await ra.wait(for: "accepted bob")

    try await bob.connect()
    let session = try await bob.joinSession(sessionID: accepted.sessionID)
    #expect(session.id == ringing.sessionID)

    // The other answers: reject over HTTP (busy), conflict after the fact, not a party.
    let second = try await alice.initiateCall(to: ["carol"], callType: .audio)
    let carol = RelayHTTPAPI(
      relayURL: relay.url, token: try RelayProcess.token(secret: Self.secret, sub: "carol", name: "Carol"))
    #expect(try await carol.rejectCall(callID: second.id, reason: "busy").status == .rejected)
    await ra.wait(for: "rejected carol busy")
    do {
      try await carol.acceptCall(callID: second.id)
      Issue.record("accepted a rejected call")
    } catch {
      #expect(error.code == .conflict)
    }
    do {
      _ = try await bob.http.call(second.id)
      Issue.record("a non-party read the call")
    } catch {
      #expect(error.code == .notFound)
    }
    #expect(try await alice.http.call(second.id).direction == .outgoing)
    _ = rb
    alice.disconnect()
    bob.disconnect()
    relay.stop()
  }

  @Test("hello.device makes a foreground device awake (not pushed); backgrounded or gone, it is pushed")
  func awakeDevices() async throws {
    let relay = try RelayProcess(["--ring-timeout", "20000"])
    let (alice, ra) = client(relay, dev("alice", host: true), device: .fixed("alice-laptop"))
    alice.addParticipantEventListener(id: "r", ra)
    let (phone, rp) = client(relay, dev("bob"), device: .fixed("bob-phone"))
    let (tablet, _) = client(relay, dev("bob"), device: .fixed("bob-tablet"))
    for c in [alice, phone, tablet] { try await c.connect() }
    try await phone.registerPushToken(Self.voipToken, kind: .apnsVoip)
    try await tablet.registerPushToken("fcm-tablet-token", kind: .fcm)

    // Both devices open and in the foreground: rung over their sockets only.
    let first = try await alice.initiateCall(to: ["bob"], callType: .audio)
    await rp.wait(for: "incoming alice")
    try await waitPushed(alice, first.id, 0)
    try await alice.cancelCall(callID: first.id)

    // The phone goes to the background (the next command's `ok` proves the relay read
    // `client.background` first: one connection, in order): pushed, and its socket rings too.
    phone.setBackground(true)
    try await phone.registerPushToken(Self.voipToken, kind: .apnsVoip)
    let second = try await alice.initiateCall(to: ["bob"], callType: .video)
    try await waitPushed(alice, second.id, 1)
    #expect(alice.state.calls[second.id]?.callees["bob"] == "ringing", "the backgrounded socket still rings too")
    try await alice.cancelCall(callID: second.id)

    // The tablet's app is gone (alice sees it leave their room, so the relay knows): pushed as well.
    let room = "push-room-\(UUID().uuidString)"
    try await alice.joinSession(sessionID: room)
    try await tablet.joinSession(sessionID: room)
    tablet.disconnect()
    await ra.wait(for: "participantLeft \(room) bob left")
    let third = try await alice.initiateCall(to: ["bob"], callType: .video)
    try await waitPushed(alice, third.id, 2)
    try await alice.cancelCall(callID: third.id)

    // Unregistered: no push for that device any more.
    try await phone.unregisterPushToken(Self.voipToken)
    let fourth = try await alice.initiateCall(to: ["bob"], callType: .audio)
    try await waitPushed(alice, fourth.id, 1)
    for c in [alice, phone] { c.disconnect() }
    relay.stop()
  }

  /// Waits (bounded; `Recorder` rechecks `state` conditions every 50 ms) until the
  /// caller heard `call.ringing`/`call.offline` for bob, then checks `pushed`.
  private func waitPushed(_ caller: RelayClient, _ callID: String, _ count: Int) async throws {
    // (`callees` starts as "ringing" with the `ok`; `pushed` comes with the event.)
    await Recorder().wait(10, "call.ringing/call.offline for bob") { _ in
      caller.state.calls[callID]?.pushed["bob"] != nil
    }
    #expect(caller.state.calls[callID]?.pushed["bob"] ?? -1 == count)
  }

  @Test("a relay that is not there: nothing was sent")
  func unreachable() async {
    await FoundationNetworkingGate.exclusive { await unreachableBody() }
  }

  private func unreachableBody() async {
    let api = RelayHTTPAPI(
      relayURL: URL(string: "ws://127.0.0.1:\(RelayProcess.freePort())/v1/ws")!, token: "t", device: "d")
    do {
      try await api.registerPushToken("ab", kind: .fcm)
      Issue.record("no relay, yet registered")
    } catch {
      #expect(error == .notConnected)
    }
  }
}
