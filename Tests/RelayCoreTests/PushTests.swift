// §9a push: registrations and which device gets which push, when. alice (c1) calls;
// bob's devices are "phone" (APNs VoIP + alert), "tablet" (FCM), and "web" (a browser
// with no token). Pushes render as `push kind=… device=… uid=… call=… message=…`.
import RelayProtocol
import Testing

@testable import RelayCore

let voipToken = String(repeating: "ab", count: 32)
let alertToken = String(repeating: "cd", count: 32)

final class PushHarness {
  let h: Harness

  init(configure: (inout CoreConfig) -> Void = { _ in }) {
    h = Harness {
      withoutHeartbeats(&$0)
      configure(&$0)
    }
    h.connect(1, uid: "alice")
  }

  /// Connection `n` says hello as `uid` from `device`; drains.
  func hello(_ n: UInt64, uid: String, device: String?) {
    h.open(n)
    let field = device.map { #","device":"\#($0)""# } ?? ""
    h.send(n, #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid.uppercased())"}\#(field)}"#)
    _ = h.out()
  }

  @discardableResult
  func register(_ n: UInt64, _ token: String, _ kind: String, device: String? = nil, extra: String = "") -> [String] {
    let field = device.map { #","device":"\#($0)""# } ?? ""
    h.send(n, #"{"type":"push.register","id":"r","token":"\#(token)","kind":"\#(kind)"\#(field)\#(extra)}"#)
    return h.out()
  }

  /// Registers bob's phone (voip + alert) and tablet (fcm) over a connection that
  /// then closes: the app is killed.
  func registerBobAndKill(n: UInt64 = 9) {
    hello(n, uid: "bob", device: "phone")
    register(n, voipToken, "apns-voip")
    register(n, alertToken, "apns")
    register(n, "fcm-token-1", "fcm", device: "tablet")
    h.core.closed(ConnectionID(n), clean: true, at: h.now)
    _ = h.out()
  }

  /// `call.initiate` from c1 to `to`; returns (callId, lines).
  func call(_ to: String = "bob") -> (String, [String]) {
    h.send(1, #"{"type":"call.initiate","id":"i","to":["\#(to)"],"callType":"audio"}"#)
    let lines = h.out()
    let reply = delivered(to: 1, lines).first ?? ""
    return ((try? JSONParser.parse(reply))?["callId"]?.stringValue ?? "?", lines)
  }
}

func pushes(_ lines: [String]) -> [String] {
  lines.filter { $0.hasPrefix("push ") }.map { String($0.dropFirst(5)) }
}

func ringPush(_ kind: String, _ device: String, _ call: String, uid: String = "bob") -> String {
  "kind=\(kind) device=\(device) uid=\(uid) call=\(call) message=ring"
}

func endedPush(_ kind: String, _ device: String, _ call: String, _ reason: String, uid: String = "bob") -> String {
  "kind=\(kind) device=\(device) uid=\(uid) call=\(call) message=ended(\(reason))"
}

@Suite struct PushRegistrationTests {
  @Test func registerReplaceUnregister() {
    let t = PushHarness()
    t.hello(2, uid: "bob", device: "phone")
    #expect(t.register(2, "fcm-a", "fcm") == [#"c2 <- {"type":"ok","re":"r"}"#])
    t.register(2, "fcm-b", "fcm")  // one token per (user, device, kind): replaces fcm-a
    t.register(2, voipToken.uppercased(), "apns-voip", extra: #","environment":"sandbox""#)
    let regs = t.h.core.pushRegistrations(of: "bob")
    #expect(regs.map(\.token) == [voipToken, "fcm-b"], "kind order; APNs hex canonical (lowercase)")
    #expect(regs.map(\.environment) == [.sandbox, .production])
    #expect(t.h.core.pushStats.registrations == 2)
    t.h.send(2, #"{"type":"push.unregister","id":"u","token":"fcm-b"}"#)
    #expect(t.h.out() == [#"c2 <- {"type":"ok","re":"u"}"#])
    t.h.send(2, #"{"type":"push.unregister","id":"u","token":"\#(voipToken.uppercased())"}"#)
    _ = t.h.out()
    #expect(t.h.core.pushRegistrations(of: "bob").isEmpty)
    #expect(t.h.core.pushStats.registrations == 0 && t.h.core.pushStats.devices == 0)
  }

  @Test func badFieldsAreBadRequestsAndStoreNothing() {
    let t = PushHarness()
    t.hello(2, uid: "bob", device: nil)
    let cases = [
      ("fcm-a", "fcm", ""),  // no device here nor in hello
      ("abc", "apns-voip", #","device":"p""#),  // too short, not hex
      (String(repeating: "g", count: 64), "apns", #","device":"p""#),
      (String(repeating: "a", count: 202), "apns", #","device":"p""#),
      (String(repeating: "x", count: 4_097), "fcm", #","device":"p""#),
      ("bad\\u0001token", "fcm", #","device":"p""#),
      ("fcm-a", "gcm", #","device":"p""#),
      ("fcm-a", "fcm", #","device":"p","environment":"sandbox""#),
      (voipToken, "apns", #","device":"p","environment":"staging""#),
      ("fcm-a", "fcm", #","device":"bad device""#),
      ("fcm-a", "fcm", #","device":"\#(String(repeating: "d", count: 129))""#),
    ]
    for (token, kind, extra) in cases {
      t.h.send(2, #"{"type":"push.register","id":"r","token":"\#(token)","kind":"\#(kind)"\#(extra)}"#)
      let lines = t.h.out()
      #expect(code(lines) == "bad_request", "\(kind) \(token.prefix(12)) \(extra): \(lines)")
    }
    #expect(t.h.core.pushRegistrations(of: "bob").isEmpty)
    t.h.open(3)
    t.h.send(3, #"{"type":"hello","dev":{"uid":"x","name":"X"},"device":"no spaces"}"#)
    #expect(code(t.h.out()) == "bad_request")
  }

  @Test func atMostMaxDevicesTheLeastRecentlyRegisteredGoes() {
    let t = PushHarness { $0.maxPushDevices = 2 }
    t.hello(2, uid: "bob", device: nil)
    t.register(2, "t1", "fcm", device: "d1")
    t.register(2, "t2", "fcm", device: "d2")
    t.register(2, "t1b", "fcm", device: "d1")  // d1 is now the most recent
    t.register(2, "t3", "fcm", device: "d3")
    #expect(t.h.core.pushRegistrations(of: "bob").map(\.device) == ["d1", "d3"])
    t.register(2, "t3", "fcm", device: "d4")  // one token, one device of a user
    #expect(t.h.core.pushRegistrations(of: "bob").map(\.device) == ["d1", "d4"])
    #expect(t.h.core.pushStats.registrations == 2)
  }

  @Test func aTokenBelongsToOneUser() {
    let t = PushHarness()
    t.hello(2, uid: "bob", device: "phone")
    t.register(2, "shared", "fcm")
    t.hello(3, uid: "carol", device: "phone")  // the same install, signed in as carol
    t.register(3, "shared", "fcm")
    #expect(t.h.core.pushRegistrations(of: "bob").isEmpty)
    #expect(t.h.core.pushRegistrations(of: "carol").map(\.token) == ["shared"])
    #expect(t.h.core.pushStats.registrations == 1)
    #expect(!t.h.core.removePushToken(uid: "bob", token: "shared", at: t.h.now))
  }

  @Test func httpActionsAndProviderRemoval() {
    let t = PushHarness()
    let bob = Identity(uid: "bob", name: "Bob")
    let fields = PushRegistrationFields(token: "fcm-1", kind: "fcm", environment: nil, device: nil)
    #expect(t.h.core.pushDeviceAction(.register(fields), device: "tab", identity: bob, at: t.h.now).status == 204)
    #expect(t.h.core.pushDeviceAction(.register(fields), device: "bad device", identity: bob, at: t.h.now).status == 400)
    #expect(t.h.core.pushRegistrations(of: "bob").map(\.device) == ["tab"])
    #expect(t.h.core.removePushToken(uid: "bob", token: "fcm-1", at: t.h.now))
    #expect(!t.h.core.removePushToken(uid: "bob", token: "fcm-1", at: t.h.now))
    #expect(t.h.core.pushRegistrations(of: "bob").isEmpty)
    t.h.core.pushDeviceAction(.register(fields), device: "tab", identity: bob, at: t.h.now)
    #expect(t.h.core.pushDeviceAction(.unregister, device: "tab", identity: bob, at: t.h.now).status == 204)
    #expect(t.h.core.pushRegistrations(of: "bob").isEmpty)
  }

  @Test func aRemovedTokenIsNotPushedOnTheNextCall() {
    let t = PushHarness()
    t.registerBobAndKill()
    #expect(t.h.core.removePushToken(uid: "bob", token: voipToken, at: t.h.now))
    let (call, lines) = t.call()
    #expect(pushes(lines) == [ringPush("apns", "phone", call), ringPush("fcm", "tablet", call)])
  }
}

@Suite struct PushRingTests {
  @Test func killedAppOneRingPushPerDevice() {
    let t = PushHarness()
    t.registerBobAndKill()
    let (call, lines) = t.call()
    #expect(pushes(lines) == [ringPush("apns-voip", "phone", call), ringPush("fcm", "tablet", call)])
    #expect(lines.contains(#"c1 <- {"type":"call.offline","callId":"\#(call)","uid":"bob","pushed":2}"#))
    #expect(lines.contains { $0.hasPrefix("webhook call.offline") }, "the webhook still fires")
    t.h.advance(10_000)
    #expect(pushes(t.h.out()).isEmpty, "never a second ring push")
  }

  @Test func backgroundedDevicePushedForegroundNot() {
    let t = PushHarness()
    t.registerBobAndKill()
    t.hello(2, uid: "bob", device: "phone")  // foreground
    t.hello(3, uid: "bob", device: "tablet")
    t.h.send(3, #"{"type":"client.background","background":true}"#)
    _ = t.h.out()
    let (call, lines) = t.call()
    #expect(pushes(lines) == [ringPush("fcm", "tablet", call)])
    #expect(lines.contains(#"c1 <- {"type":"call.ringing","callId":"\#(call)","uid":"bob","pushed":1}"#))
    #expect(lines.contains { $0.hasPrefix("c2,c3 <- ") && $0.contains("call.incoming") }, "both sockets ring too")
  }

  @Test func twoDevicesOneAwakeSocketAndPush() {
    let t = PushHarness()
    t.registerBobAndKill()
    t.hello(2, uid: "bob", device: "tablet")
    let (call, lines) = t.call()
    #expect(pushes(lines) == [ringPush("apns-voip", "phone", call)])
    #expect(lines.contains { $0.hasPrefix("c2 <- ") && $0.contains("call.incoming") })
  }

  @Test func deviceFallingAsleepMidRingIsPushedOnce() {
    let t = PushHarness()
    t.registerBobAndKill()
    t.hello(2, uid: "bob", device: "phone")
    t.hello(3, uid: "bob", device: "phone")  // a second socket of the same install
    t.hello(4, uid: "bob", device: "tablet")
    let (call, lines) = t.call()
    #expect(pushes(lines).isEmpty)
    t.h.send(2, #"{"type":"client.background","background":true}"#)
    #expect(pushes(t.h.out()).isEmpty, "c3 keeps the phone awake")
    t.h.core.closed(ConnectionID(3), clean: false, at: t.h.now)
    #expect(pushes(t.h.out()) == [ringPush("apns-voip", "phone", call)])
    t.h.core.closed(ConnectionID(2), clean: true, at: t.h.now)
    #expect(pushes(t.h.out()).isEmpty, "once per (call, device)")
    t.h.core.closed(ConnectionID(4), clean: true, at: t.h.now)
    #expect(pushes(t.h.out()) == [ringPush("fcm", "tablet", call)])
    t.hello(5, uid: "bob", device: "tablet")
    t.h.send(5, #"{"type":"client.background","background":true}"#)
    #expect(pushes(t.h.out()).isEmpty)
  }

  @Test func heartbeatLossPushesTheDevice() {
    let t = PushHarness { $0.heartbeatIntervalMs = 1_000; $0.heartbeatTimeoutMs = 3_000 }
    t.registerBobAndKill()
    t.hello(2, uid: "bob", device: "phone")
    t.hello(3, uid: "bob", device: "tablet")
    let (call, _) = t.call()
    var got: [String] = []
    for _ in 0..<5 {
      t.h.alive(1)
      t.h.alive(3)
      t.h.advance(1_000)
      got += pushes(t.h.out())
    }
    #expect(got == [ringPush("apns-voip", "phone", call)])
  }
}

@Suite struct PushFollowUpTests {
  /// bob's phone and tablet were pushed; `end` ends the ring; returns the follow-ups.
  func followUps(_ end: (PushHarness, String) -> Void) -> (String, [String]) {
    let t = PushHarness()
    t.registerBobAndKill()
    let (call, _) = t.call()
    end(t, call)
    return (call, pushes(t.h.out()))
  }

  @Test func cancelledAndUnansweredReachEveryKind() {
    let (c1, cancelled) = followUps { t, call in
      t.h.send(1, #"{"type":"call.cancel","callId":"\#(call)"}"#)
    }
    #expect(cancelled == [endedPush("apns", "phone", c1, "cancelled"), endedPush("fcm", "tablet", c1, "cancelled")])
    let (c2, unanswered) = followUps { t, _ in t.h.advance(45_000) }
    #expect(unanswered == [endedPush("apns", "phone", c2, "unanswered"), endedPush("fcm", "tablet", c2, "unanswered")])
  }

  @Test func answeredOrRejectedElsewhereReachFCMOnly() {
    let (c1, accepted) = followUps { t, call in
      t.hello(5, uid: "bob", device: "laptop")
      t.h.send(5, #"{"type":"call.accept","callId":"\#(call)"}"#)
    }
    #expect(accepted == [endedPush("fcm", "tablet", c1, "answered_elsewhere")])
    let (c2, rejected) = followUps { t, call in
      t.hello(5, uid: "bob", device: "phone")
      t.h.send(5, #"{"type":"call.reject","callId":"\#(call)"}"#)
    }
    #expect(rejected == [endedPush("fcm", "tablet", c2, "rejected_elsewhere")])
    let (_, ownAccept) = followUps { t, call in
      t.hello(5, uid: "bob", device: "tablet")
      t.h.send(5, #"{"type":"call.accept","callId":"\#(call)"}"#)
    }
    #expect(ownAccept.isEmpty, "the device that answered needs no follow-up")
  }

  @Test func exactlyOneFollowUpPerPushedDevice() {
    let (call, lines) = followUps { t, call in
      t.h.send(1, #"{"type":"call.cancel","callId":"\#(call)"}"#)
      t.h.advance(45_000)
      t.h.core.closed(ConnectionID(1), clean: true, at: t.h.now)
      t.h.advance(400_000)
    }
    #expect(lines.count == 2 && lines.allSatisfy { $0.contains("call=\(call) message=ended(cancelled)") })
  }

  /// A VoIP token takes only VoIP pushes, and a second one per ring is forbidden:
  /// without an alert token the device gets no follow-up.
  @Test func voipOnlyDeviceGetsNoFollowUp() {
    let t = PushHarness()
    t.hello(9, uid: "bob", device: "phone")
    t.register(9, voipToken, "apns-voip")
    t.h.core.closed(ConnectionID(9), clean: true, at: t.h.now)
    let (call, lines) = t.call()
    #expect(pushes(lines) == [ringPush("apns-voip", "phone", call)])
    t.h.advance(45_000)
    #expect(pushes(t.h.out()).isEmpty)
  }
}

@Suite struct PushSnapshotTests {
  /// Mid-ring, with registrations, devices named by connections and pushed devices: the
  /// restored core encodes to the same bytes and sends the same follow-ups.
  @Test func roundTripMidRing() throws {
    let t = PushHarness()
    t.registerBobAndKill()
    t.hello(2, uid: "bob", device: "tablet")
    let (call, _) = t.call()
    let bytes = t.h.core.snapshot()
    let twin = try RelayCore(
      restoring: bytes, config: t.h.core.config, ids: SeededIDs(prefix: "twin"), verifyToken: { _, _ in nil })
    #expect(twin.snapshot() == bytes)
    #expect(twin.pushRegistrations(of: "bob") == t.h.core.pushRegistrations(of: "bob"))
    #expect(twin.pushStats == t.h.core.pushStats)
    for core in [t.h.core, twin] {
      core.receive(ConnectionID(2), text: Array(#"{"type":"client.background","background":true}"#.utf8), at: t.h.now)
      core.receive(ConnectionID(1), text: Array(#"{"type":"call.cancel","callId":"\#(call)"}"#.utf8), at: t.h.now)
      #expect(
        pushes(core.takeEffects().map(Harness.render)) == [
          ringPush("fcm", "tablet", call), endedPush("apns", "phone", call, "cancelled"),
          endedPush("fcm", "tablet", call, "cancelled"),
        ])
    }
  }

  @Test func inconsistentPushStateIsRefused() throws {
    let t = PushHarness()
    t.registerBobAndKill()
    let bytes = t.h.core.snapshot()
    // The registry is last: flip the fcm token's first byte to a control character,
    // and the phone's device id to a space.
    for (from, to) in [("fcm-token-1", "\u{1}cm-token-1"), ("phone", "ph ne")] {
      let needle = Array(from.utf8)
      guard let at = (0...(bytes.count - needle.count)).last(where: { Array(bytes[$0..<$0 + needle.count]) == needle }) else {
        Issue.record("\(from) not in the snapshot")
        continue
      }
      var bad = bytes
      bad.replaceSubrange(at..<at + needle.count, with: Array(to.utf8))
      #expect(throws: BinaryError.self) {
        try RelayCore(restoring: bad, config: t.h.core.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
      }
    }
  }
}

@Suite struct PushCallerGoneTests {
  /// §5: the caller's grace ends while the call rings: callees stop with
  /// `caller_timed_out`, and their pushed devices get that follow-up, every kind.
  @Test func callerTimedOutReachesEveryKind() {
    let t = PushHarness { $0.graceMs = 1_000 }
    t.registerBobAndKill()
    let (call, _) = t.call()
    t.h.core.closed(ConnectionID(1), clean: false, at: t.h.now)
    _ = t.h.out()
    t.h.advance(1_000)
    #expect(
      pushes(t.h.out()) == [
        endedPush("apns", "phone", call, "caller_timed_out"), endedPush("fcm", "tablet", call, "caller_timed_out"),
      ])
  }
}
