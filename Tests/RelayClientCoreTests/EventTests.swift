// Session events, seq handling across resumes, and calls, on the pure machine.

@testable import RelayClientCore
import RelayProtocol
import Testing

@Suite struct SessionEventTests {
  @Test("the hand queue follows hand.raised order; a re-raise goes to the back; cleared empties it")
  func handQueue() {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("room", seq: 3, members: ["alice", "carol", "bob"], hands: ["alice"]))
    h.server(Harness.hand("hand.raised", "room", seq: 4, uid: "carol"))
    h.server(Harness.hand("hand.raised", "room", seq: 5, uid: "bob"))
    h.server(Harness.hand("hand.lowered", "room", seq: 6, uid: "alice"))
    h.server(Harness.hand("hand.raised", "room", seq: 7, uid: "alice"))
    #expect(h.machine.snapshot.sessions["room"]?.hands.map(\.uid) == ["carol", "bob", "alice"])
    let cleared = h.server(#"{"type":"hands.cleared","session":"room","seq":8,"ts":5,"by":"alice"}"#)
    #expect(cleared.events.count == 3)
    #expect(h.machine.snapshot.sessions["room"]?.hands.isEmpty == true)
  }

  @Test("replayed duplicates are dropped; a gap drops the socket and resumes from the last seq")
  func dedupAndGap() {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("room", seq: 3, members: ["alice", "bob"]))
    #expect(h.server(Harness.message("room", seq: 4, n: 1)).events.count == 1)
    #expect(h.server(Harness.message("room", seq: 4, n: 1)).events.isEmpty)
    #expect(h.server(Harness.message("room", seq: 2)).events.isEmpty)
    let gap = h.server(Harness.message("room", seq: 6))
    #expect(gap.first == .closeTransport(code: nil))
    #expect(gap.events == [.connectionLost])
    #expect(h.machine.snapshot.sessions["room"]?.seq == 4)
    h.advance(500)
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["resume"]?["sessions"]?["room"]?.numberValue?.int64 == 4)
    h.server(h.welcome(resumed: true))
    #expect(h.server(Harness.message("room", seq: 4)).events.isEmpty)
    #expect(h.server(Harness.message("room", seq: 5, n: 5)).events.count == 1)
    h.server(#"{"type":"session.resumed","session":"room","recovered":true,"seq":5}"#)
    #expect(h.server(Harness.message("room", seq: 6, n: 6)).events.count == 1)
  }

  @Test("recovered: false replaces the snapshot and reports the difference")
  func notRecovered() {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("room", seq: 3, members: ["alice", "carol", "bob"], hands: ["carol"]))
    h.run { m, now in m.transportClosed(code: 1001, reason: "", nowMs: now) }
    h.advance(500)
    h.run { m, now in m.transportOpened(nowMs: now) }
    h.server(h.welcome(resumed: true))
    let effects = h.server(Harness.joined("room", seq: 900, members: ["alice", "bob", "dave"], recovered: false))
    #expect(
      effects.events.dropLast() == [
        .handLowered(session: "room", uid: "carol", by: "carol", reason: "resync"),
        .participantLeft(session: "room", uid: "carol", reason: "resync"),
        .participantJoined(session: "room", Participant(uid: "dave", name: "dave", joinedAt: 1)),
      ])
    #expect(h.machine.snapshot.sessions["room"]?.seq == 900)
  }

  @Test("welcome with resumed: false re-joins every session")
  func rejoin() {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("a", seq: 1, members: ["bob"]))
    h.server(Harness.joined("b", seq: 1, members: ["bob"]))
    h.run { m, now in m.transportClosed(code: nil, reason: "", nowMs: now) }
    h.advance(500)
    h.run { m, now in m.transportOpened(nowMs: now) }
    let effects = h.server(h.welcome(resumed: false))
    #expect(effects.sentTypes == ["session.join", "session.join"])
    #expect(effects.events == [.connectionRestored])
  }

  @Test("join replies wait for the snapshot; errors carry the protocol code")
  func replies() {
    var h = Harness()
    h.connectAndWelcome()
    let join = h.run { m, now in m.command(.joinSession("room"), requestID: 1, nowMs: now) }
    let id = join.first?.sent?["id"]?.stringValue ?? ""
    #expect(h.server(#"{"type":"ok","re":"\#(id)"}"#).isEmpty)
    let joined = h.server(Harness.joined("room", seq: 1, members: ["bob"]))
    #expect(joined.last == .reply(requestID: 1, .success(JSONObject([("type", .string("ok")), ("re", .string(id))]))))
    let lower = h.run { m, now in m.command(.lowerHand(session: "room", uid: "alice"), requestID: 2, nowMs: now) }
    #expect(lower.first?.sent?["uid"]?.stringValue == "alice")
    let lowerID = lower.first?.sent?["id"]?.stringValue ?? ""
    let failed = h.server(#"{"type":"error","re":"\#(lowerID)","code":"forbidden","message":"host only"}"#)
    #expect(failed == [.reply(requestID: 2, .failure(.server(code: .forbidden, message: "host only")))])
  }
}

@Suite struct CallMachineTests {
  static let incoming =
    #"{"type":"call.incoming","callId":"k1","sessionId":"s1","from":{"uid":"alice","name":"Alice"},"to":["bob"],"callType":"video","expiresAt":99}"#

  @Test("a call ringing at welcome is reported once, not again after a resume")
  func ringingAtWelcome() {
    var h = Harness()
    h.connectAndWelcome()
    let first = h.server(Self.incoming)
    guard case .incomingCall(let call)? = first.events.first else { return #expect(Bool(false)) }
    #expect(call.from.uid == "alice" && call.callType == .video && call.status == .ringing)
    h.run { m, now in m.transportClosed(code: nil, reason: "", nowMs: now) }
    h.advance(500)
    h.run { m, now in m.transportOpened(nowMs: now) }
    h.server(h.welcome(resumed: true))
    #expect(h.server(Self.incoming).events.isEmpty)
    let cancelled = h.server(#"{"type":"call.cancelled","callId":"k1","reason":"answered_elsewhere"}"#)
    guard case .incomingCallCancelled(let c, let reason)? = cancelled.events.first else {
      return #expect(Bool(false))
    }
    #expect(reason == .answeredElsewhere && c.status == .cancelled)
  }

  @Test("outgoing: ok creates the call; per-callee outcomes decide its status")
  func outgoing() {
    var h = Harness()
    h.connectAndWelcome()
    let initiate = h.run { m, now in
      m.command(.initiateCall(to: ["carol", "dave"], callType: .audio, metadata: nil), requestID: 1, nowMs: now)
    }
    let id = initiate.first?.sent?["id"]?.stringValue ?? ""
    h.server(#"{"type":"ok","re":"\#(id)","callId":"k2","sessionId":"s2"}"#)
    #expect(h.machine.snapshot.calls["k2"]?.direction == .outgoing)
    h.server(#"{"type":"call.ringing","callId":"k2","uid":"carol"}"#)
    h.server(#"{"type":"call.busy","callId":"k2","uid":"dave"}"#)
    #expect(h.machine.snapshot.calls["k2"]?.status == .ringing)
    let rejected = h.server(#"{"type":"call.rejected","callId":"k2","uid":"carol","reason":"declined"}"#)
    #expect(rejected.events.count == 1)
    #expect(h.machine.snapshot.calls["k2"]?.status == .rejected)
  }
}
