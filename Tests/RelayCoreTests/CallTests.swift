// §9 ringing, one outcome at a time, with injected time. alice (c1) calls; bob has two
// devices (c2, c3); carol is c4; dave never connects unless a test says so.
import RelayProtocol
import Testing

@testable import RelayCore

/// Sets up alice, bob×2 and carol, and starts calls.
final class CallHarness {
  let h: Harness

  init(ringTimeoutMs: Int64 = 45_000, devMode: Bool = true, tokens: [String: Identity] = [:]) {
    h = Harness(devMode: devMode, tokens: tokens) {
      $0.ringTimeoutMs = ringTimeoutMs
      withoutHeartbeats(&$0)  // §5 pings go unanswered here; calls are the subject
    }
    if devMode {
      h.connect(1, uid: "alice")
      h.connect(2, uid: "bob")
      h.connect(3, uid: "bob")
      h.connect(4, uid: "carol")
    }
  }

  /// `call.initiate` from c1; returns (callId, sessionId, everything emitted).
  func call(_ to: [String], from n: UInt64 = 1, type: String = "video", extra: String = "") -> (String, String, [String]) {
    let list = to.map { "\"\($0)\"" }.joined(separator: ",")
    h.send(n, #"{"type":"call.initiate","id":"i","to":[\#(list)],"callType":"\#(type)"\#(extra)}"#)
    let lines = h.out()
    let reply = delivered(to: n, lines).first ?? ""
    let parsed = try? JSONParser.parse(reply)
    return (parsed?["callId"]?.stringValue ?? "?", parsed?["sessionId"]?.stringValue ?? "?", lines)
  }

  func send(_ n: UInt64, _ type: String, _ callId: String, id: String = "x", extra: String = "") -> [String] {
    h.send(n, #"{"type":"\#(type)","id":"\#(id)","callId":"\#(callId)"\#(extra)}"#)
    return h.out()
  }
}

func code(_ lines: [String]) -> String? {
  guard lines.count == 1, let json = lines.first?.split(separator: " <- ", maxSplits: 1).last else { return nil }
  return (try? JSONParser.parse(String(json)))?["code"]?.stringValue
}

@Suite struct CallTests {
  @Test func initiateRingsEveryDeviceAndReportsOfflineCallees() {
    let t = CallHarness()
    let (call, session, lines) = t.call(["bob", "dave"], extra: #","metadata":{"topic":"x"}"#)
    let exp = t.h.ts + 45_000
    #expect(lines.prefix(5) == [
      #"c1 <- {"type":"ok","re":"i","callId":"\#(call)","sessionId":"\#(session)"}"#,
      #"c1 <- {"type":"call.ringing","callId":"\#(call)","uid":"bob","pushed":0}"#,
      #"c1 <- {"type":"call.offline","callId":"\#(call)","uid":"dave","pushed":0}"#,
      #"webhook call.offline {"event":"call.offline","callId":"\#(call)","sessionId":"\#(session)","uid":"dave","from":{"uid":"alice","name":"ALICE"},"to":["bob","dave"],"callType":"video","metadata":{"topic":"x"},"expiresAt":\#(exp),"sentAt":\#(t.h.ts)}"#,
      #"c2,c3 <- {"type":"call.incoming","callId":"\#(call)","sessionId":"\#(session)","from":{"uid":"alice","name":"ALICE"},"to":["bob","dave"],"callType":"video","metadata":{"topic":"x"},"expiresAt":\#(exp)}"#,
    ])
    #expect(lines.count == 5)
  }

  @Test func acceptOnOneDeviceCancelsTheOther() {
    let t = CallHarness()
    let (call, session, _) = t.call(["bob"])
    let lines = t.send(3, "call.accept", call)
    #expect(lines == [
      #"c3 <- {"type":"ok","re":"x"}"#,
      #"c3,c1 <- {"type":"call.accepted","callId":"\#(call)","uid":"bob","sessionId":"\#(session)"}"#,
      #"c2 <- {"type":"call.cancelled","callId":"\#(call)","reason":"answered_elsewhere"}"#,
      #"webhook call.accepted {"event":"call.accepted","callId":"\#(call)","sessionId":"\#(session)","uid":"bob","sentAt":\#(t.h.ts)}"#,
    ])
    #expect(code(t.send(2, "call.accept", call)) == "conflict")
    #expect(code(t.send(2, "call.reject", call)) == "conflict")
  }

  @Test func rejectTellsTheCallerAndStopsOtherDevices() {
    let t = CallHarness()
    let (call, _, _) = t.call(["bob", "carol"])
    let lines = t.send(2, "call.reject", call, extra: #","reason":"busy""#)
    #expect(lines.prefix(3) == [
      #"c2 <- {"type":"ok","re":"x"}"#,
      #"c1 <- {"type":"call.rejected","callId":"\#(call)","uid":"bob","reason":"busy"}"#,
      #"c3 <- {"type":"call.cancelled","callId":"\#(call)","reason":"rejected_elsewhere"}"#,
    ])
    // carol still rings; default reason is declined.
    #expect(delivered(to: 1, t.send(4, "call.reject", call)) == [
      #"{"type":"call.rejected","callId":"\#(call)","uid":"carol","reason":"declined"}"#
    ])
    #expect(t.h.core.callInfo(callId: call, uid: "alice").map { String(decoding: $0, as: UTF8.self) }?.contains(#""state":"rejected""#) == true)
  }

  @Test func cancelStopsEveryRingingCalleeAndWithdrawsOfflinePushes() {
    let t = CallHarness()
    let (call, session, _) = t.call(["bob", "dave"])
    let lines = t.send(1, "call.cancel", call)
    #expect(lines == [
      #"c1 <- {"type":"ok","re":"x"}"#,
      #"c2,c3 <- {"type":"call.cancelled","callId":"\#(call)","reason":"cancelled"}"#,
      #"webhook call.cancelled {"event":"call.cancelled","callId":"\#(call)","sessionId":"\#(session)","uid":"dave","reason":"cancelled","sentAt":\#(t.h.ts)}"#,
    ])
    #expect(code(t.send(1, "call.cancel", call)) == "conflict")
    #expect(code(t.send(2, "call.accept", call)) == "conflict")
  }

  @Test func ringTimeoutMakesEveryRingingCalleeUnanswered() {
    let t = CallHarness(ringTimeoutMs: 500)
    let (call, _, _) = t.call(["bob", "carol", "dave"])
    _ = t.send(4, "call.accept", call)
    #expect(t.h.core.nextDeadline == t.h.now.monoMs + 500)
    t.h.advance(499)
    #expect(t.h.out().isEmpty)
    t.h.advance(1)
    let lines = t.h.out()
    #expect(lines.prefix(1) == [#"c2,c3 <- {"type":"call.cancelled","callId":"\#(call)","reason":"unanswered"}"#])
    #expect(delivered(to: 1, lines) == [
      #"{"type":"call.unanswered","callId":"\#(call)","uid":"bob"}"#,
      #"{"type":"call.unanswered","callId":"\#(call)","uid":"dave"}"#,
    ])
    #expect(lines.filter { $0.hasPrefix("webhook call.cancelled") }.count == 1)  // dave only
    #expect(delivered(to: 4, lines).isEmpty)  // carol accepted: no ring to stop
    #expect(code(t.send(2, "call.accept", call)) == "conflict")
  }

  @Test func busyCalleeIsNotRung() {
    let t = CallHarness()
    let (first, _, _) = t.call(["bob"])
    _ = t.send(2, "call.accept", first)
    let (second, _, lines) = t.call(["bob"], from: 4)
    #expect(lines.count == 2)
    #expect(lines.last == #"c4 <- {"type":"call.busy","callId":"\#(second)","uid":"bob"}"#)
    // The caller of an accepted call is busy too.
    let (third, _, more) = t.call(["alice"], from: 4)
    #expect(more.last == #"c4 <- {"type":"call.busy","callId":"\#(third)","uid":"alice"}"#)
    #expect(code(t.send(4, "call.cancel", third)) == "conflict")
  }

  @Test func endTellsEveryPartyWithDurationSinceAccept() {
    let t = CallHarness()
    let (call, session, _) = t.call(["bob", "carol"])
    t.h.advance(1_000)
    _ = t.send(2, "call.accept", call)
    t.h.advance(64_000)  // carol's ring times out meanwhile
    _ = t.h.out()
    let lines = t.send(2, "call.end", call)
    #expect(lines == [
      #"c2 <- {"type":"ok","re":"x"}"#,
      #"c1,c2 <- {"type":"call.ended","callId":"\#(call)","by":"bob","reason":"ended","duration":64000}"#,
      #"webhook call.ended {"event":"call.ended","callId":"\#(call)","sessionId":"\#(session)","by":"bob","reason":"ended","duration":64000,"sentAt":\#(t.h.ts)}"#,
    ])
    #expect(code(t.send(1, "call.end", call)) == "conflict")
    #expect(code(t.send(3, "call.end", call)) == "conflict")
  }

  @Test func endWhileAnotherCalleeRingsCancelsThatRing() {
    let t = CallHarness()
    let (call, _, _) = t.call(["bob", "carol"])
    _ = t.send(4, "call.accept", call)
    let lines = t.send(1, "call.end", call)
    #expect(lines.contains(#"c2,c3 <- {"type":"call.cancelled","callId":"\#(call)","reason":"cancelled"}"#))
    #expect(lines.contains(#"c1,c4 <- {"type":"call.ended","callId":"\#(call)","by":"alice","reason":"ended","duration":0}"#))
  }

  @Test func refusalsNameTheirCause() {
    let t = CallHarness()
    let (call, _, _) = t.call(["bob"])
    #expect(code(t.send(2, "call.accept", "nope")) == "not_found")
    #expect(code(t.send(4, "call.accept", call)) == "not_found")  // carol is no party
    #expect(code(t.send(4, "call.end", call)) == "not_found")
    #expect(code(t.send(1, "call.accept", call)) == "forbidden")
    #expect(code(t.send(2, "call.cancel", call)) == "forbidden")
    #expect(code(t.send(1, "call.end", call)) == "conflict")  // not accepted yet
    #expect(code(t.send(2, "call.end", call)) == "conflict")
    t.h.send(1, #"{"type":"call.initiate","id":"s","to":["alice"],"callType":"audio"}"#)
    #expect(code(t.h.out()) == "bad_request")
  }

  @Test func duplicateCalleesRingOnce() {
    let t = CallHarness()
    let (call, _, lines) = t.call(["bob", "bob"])
    #expect(delivered(to: 1, lines).count == 2)  // ok + one ringing
    #expect(t.h.core.callInfo(callId: call, uid: "bob").map { String(decoding: $0, as: UTF8.self) }?.contains(#""to":["bob"]"#) == true)
  }

  @Test func offlineCalleeGetsTheCallRightAfterWelcome() {
    let t = CallHarness()
    let (call, session, _) = t.call(["dave"])
    t.h.open(9)
    t.h.send(9, #"{"type":"hello","dev":{"uid":"dave","name":"Dave"}}"#)
    let lines = t.h.out()
    #expect(lines.count == 2)
    #expect(typeOf(String(lines[0].split(separator: " <- ")[1])) == "welcome")
    #expect(lines[1].hasPrefix(#"c9 <- {"type":"call.incoming","callId":"\#(call)","sessionId":"\#(session)""#))
    // A second device rings too, and is stopped with the first.
    t.h.open(10)
    t.h.send(10, #"{"type":"hello","dev":{"uid":"dave","name":"Dave"}}"#)
    _ = t.h.out()
    #expect(t.send(9, "call.accept", call).contains(#"c10 <- {"type":"call.cancelled","callId":"\#(call)","reason":"answered_elsewhere"}"#))
    // A device connecting after the answer is not rung.
    t.h.open(11)
    t.h.send(11, #"{"type":"hello","dev":{"uid":"dave","name":"Dave"}}"#)
    #expect(t.h.out().count == 1)
  }

  @Test func callerTimedOutCancelsRingsAndEndsAcceptedCalls() {
    let t = CallHarness()
    let (ringing, _, _) = t.call(["dave"])
    let (accepted, _, _) = t.call(["bob", "carol"])
    _ = t.send(4, "call.accept", accepted)
    t.h.core.closed(ConnectionID(1), clean: false, at: t.h.now)
    _ = t.h.out()
    // §5: the grace (30 000) ends and the core itself ends alice's calls.
    t.h.advance(30_000)
    let lines = t.h.out()
    #expect(lines.contains(#"c4 <- {"type":"call.ended","callId":"\#(accepted)","by":"alice","reason":"timed_out","duration":30000}"#))
    #expect(lines.contains(#"c2,c3 <- {"type":"call.cancelled","callId":"\#(accepted)","reason":"caller_timed_out"}"#))
    #expect(lines.contains { $0.hasPrefix("webhook call.cancelled") && $0.contains(ringing) && $0.contains("caller_timed_out") })
  }

  @Test func calleeTimedOutEndsItsAcceptedCall() {
    let t = CallHarness()
    let (call, _, _) = t.call(["carol"])
    _ = t.send(4, "call.accept", call)
    t.h.core.closed(ConnectionID(4), clean: false, at: t.h.now)
    t.h.core.endCallsOfTimedOutUser(uid: "carol", at: t.h.now)
    #expect(t.h.out().contains(#"c1 <- {"type":"call.ended","callId":"\#(call)","by":"carol","reason":"timed_out","duration":0}"#))
    // No longer busy.
    let (_, _, lines) = t.call(["alice"], from: 2)
    #expect(lines.contains { $0.contains("call.ringing") })
  }

  @Test func cleanCloseOfTheLastConnectionEndsAcceptedCalls() {
    let t = CallHarness()
    let (call, _, _) = t.call(["carol"])
    _ = t.send(4, "call.accept", call)
    t.h.core.closed(ConnectionID(4), clean: true, at: t.h.now)
    #expect(t.h.out().contains(#"c1 <- {"type":"call.ended","callId":"\#(call)","by":"carol","reason":"ended","duration":0}"#))
  }

  @Test func initiateIsRateLimitedPerUser() {
    let t = CallHarness()
    for _ in 0..<10 { _ = t.call(["dave"]) }
    #expect(code(Array(t.call(["dave"]).2.prefix(1))) == "rate_limited")
    t.h.advance(59_999)
    _ = t.h.out()
    #expect(code(Array(t.call(["dave"]).2.prefix(1))) == "rate_limited")
    t.h.advance(1)
    _ = t.h.out()
    #expect(t.call(["dave"]).2.first?.contains(#""type":"ok""#) == true)
  }

  @Test func callersAndAcceptersMayJoinTheCallSession() {
    let bob = Identity(uid: "bob", name: "Bob")
    let alice = Identity(uid: "alice", name: "Alice")
    let carol = Identity(uid: "carol", name: "Carol")
    let t = CallHarness(devMode: false, tokens: ["ta": alice, "tb": bob, "tc": carol])
    for (n, token) in [(1, "ta"), (2, "tb"), (4, "tc")] {
      t.h.open(UInt64(n))
      t.h.send(UInt64(n), #"{"type":"hello","token":"\#(token)"}"#)
    }
    _ = t.h.out()
    let (call, session, _) = t.call(["bob", "carol"])
    let join = #"{"type":"session.join","id":"j","session":"\#(session)"}"#
    t.h.send(2, join)
    #expect(code(t.h.out()) == "forbidden")
    _ = t.send(2, "call.accept", call)
    t.h.send(2, join)
    #expect(t.h.out().first == #"c2 <- {"type":"ok","re":"j"}"#)
    t.h.send(1, join)
    #expect(t.h.out().first == #"c1 <- {"type":"ok","re":"j"}"#)
    t.h.send(4, join)
    #expect(code(t.h.out()) == "forbidden")
  }

  @Test func finishedCallsAreForgottenAfterRetention() {
    let t = CallHarness()
    let (call, _, _) = t.call(["bob"])
    _ = t.send(2, "call.reject", call)
    t.h.advance(CallBook.retentionMs - 1)
    #expect(code(t.send(3, "call.accept", call)) == "conflict")
    t.h.advance(1)
    #expect(code(t.send(3, "call.accept", call)) == "not_found")
    #expect(t.h.core.callStats.held == 0)
    #expect(t.h.core.callStats.outcomes == ["rejected": 1])
  }
}

@Suite struct CallHTTPTests {
  func text(_ r: CallHTTPResult) -> String { String(decoding: r.body, as: UTF8.self) }

  @Test func httpActionsAreIdempotentAndGuarded() {
    let t = CallHarness()
    let (call, session, _) = t.call(["bob", "dave"])
    let dave = Identity(uid: "dave", name: "Dave")
    let carol = Identity(uid: "carol", name: "Carol")
    #expect(t.h.core.callInfo(callId: call, uid: "carol") == nil)
    #expect(t.h.core.callAction(.accept, callId: call, identity: carol, at: t.h.now).status == 404)
    #expect(t.h.core.callAction(.accept, callId: "nope", identity: dave, at: t.h.now).status == 404)
    let first = t.h.core.callAction(.accept, callId: call, identity: dave, at: t.h.now)
    #expect(first.status == 200)
    #expect(text(first) == #"{"callId":"\#(call)","sessionId":"\#(session)","from":{"uid":"alice","name":"ALICE"},"to":["bob","dave"],"callType":"video","expiresAt":\#(t.h.ts + 45_000),"state":"accepted","callees":{"bob":"ringing","dave":"accepted"}}"#)
    let lines = t.h.out()
    #expect(lines.contains(#"c1 <- {"type":"call.accepted","callId":"\#(call)","uid":"dave","sessionId":"\#(session)"}"#))
    #expect(t.h.core.callAction(.accept, callId: call, identity: dave, at: t.h.now) == first)
    #expect(t.h.out().filter { !$0.hasPrefix("webhook") }.isEmpty)
    let conflict = t.h.core.callAction(.reject(.busy), callId: call, identity: dave, at: t.h.now)
    #expect(conflict.status == 409)
    #expect(text(conflict).hasPrefix(#"{"type":"error","code":"conflict","message":"#))
    let alice = Identity(uid: "alice", name: "Alice")
    #expect(t.h.core.callAction(.accept, callId: call, identity: alice, at: t.h.now).status == 403)
    #expect(t.h.core.callAction(.cancel, callId: call, identity: alice, at: t.h.now).status == 200)
    #expect(t.h.out().contains(#"c2,c3 <- {"type":"call.cancelled","callId":"\#(call)","reason":"cancelled"}"#))
    #expect(t.h.core.callAction(.cancel, callId: call, identity: alice, at: t.h.now).status == 200)
    #expect(t.h.out().isEmpty)
  }

  @Test func httpAcceptedCalleeHearsTheEndOnItsNewSocket() {
    let t = CallHarness()
    let (call, _, _) = t.call(["dave"])
    _ = t.h.core.callAction(.accept, callId: call, identity: Identity(uid: "dave", name: "Dave"), at: t.h.now)
    _ = t.h.out()
    t.h.open(9)
    t.h.send(9, #"{"type":"hello","dev":{"uid":"dave","name":"Dave"}}"#)
    #expect(t.h.out().count == 1)  // welcome only: nothing rings
    #expect(t.send(1, "call.end", call).contains { $0.hasPrefix(#"c1,c9 <- {"type":"call.ended""#) })
    let reject = t.h.core.callAction(.reject(.declined), callId: call, identity: Identity(uid: "dave", name: "Dave"), at: t.h.now)
    #expect(reject.status == 409)
    #expect(t.h.core.callAction(.accept, callId: call, identity: Identity(uid: "dave", name: "Dave"), at: t.h.now).status == 200)
  }
}

@Suite struct SessionWebhookTests {
  @Test func sessionLifecycleWebhooksOnlyWhenEnabled() {
    let off = Harness()
    off.join(1, uid: "a")
    off.core.closed(ConnectionID(1), clean: true, at: off.now)
    #expect(!off.out().contains { $0.hasPrefix("webhook") })
    let on = Harness { $0.sessionWebhooks = true }
    on.connect(1, uid: "a")
    on.send(1, #"{"type":"session.join","session":"s"}"#)
    #expect(on.out().contains(#"webhook session.created {"event":"session.created","sessionId":"s","sentAt":\#(on.ts)}"#))
    on.core.closed(ConnectionID(1), clean: true, at: on.now)
    #expect(on.out() == [#"webhook session.ended {"event":"session.ended","sessionId":"s","sentAt":\#(on.ts)}"#])
  }
}
