// §6 sessions: snapshot, participant events, takeover, leave, removal, limits.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct SessionTests {
  @Test func firstJoinRepliesOkThenSnapshot() {
    let h = Harness()
    h.connect(1, uid: "alice")
    h.send(1, #"{"type":"session.join","id":"j","session":"room"}"#)
    let me = #"{"uid":"alice","name":"ALICE","role":"participant","joinedAt":\#(h.ts),"status":"connected"}"#
    #expect(h.out() == [
      #"c1 <- {"type":"ok","re":"j"}"#,
      #"c1 <- {"type":"session.joined","session":"room","seq":1,"self":\#(me),"participants":[\#(me)],"hands":[]}"#,
    ])
  }

  @Test func secondJoinerIsAnnouncedToMembers() {
    let h = Harness()
    h.join(1, uid: "alice")
    let aliceJoined = h.ts
    h.advance(5)
    h.connect(2, uid: "bob")
    h.send(2, #"{"type":"session.join","session":"s"}"#)
    let alice = #"{"uid":"alice","name":"ALICE","role":"participant","joinedAt":\#(aliceJoined),"status":"connected"}"#
    let bob = #"{"uid":"bob","name":"BOB","role":"participant","joinedAt":\#(h.ts),"status":"connected"}"#
    #expect(h.out() == [
      #"c1 <- {"type":"participant.joined","session":"s","seq":2,"ts":\#(h.ts),"participant":\#(bob)}"#,
      #"c2 <- {"type":"session.joined","session":"s","seq":2,"self":\#(bob),"participants":[\#(alice),\#(bob)],"hands":[]}"#,
    ])
  }

  @Test func leaveLowersTheHandFirstThenParticipantLeft() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(2, #"{"type":"session.leave","id":"l","session":"s"}"#)
    #expect(h.out() == [
      #"c2 <- {"type":"ok","re":"l"}"#,
      #"c2 <- {"type":"session.left","session":"s","reason":"left"}"#,
      #"c1 <- {"type":"hand.lowered","session":"s","seq":4,"ts":\#(h.ts),"uid":"b","by":"b","reason":"left"}"#,
      #"c1 <- {"type":"participant.left","session":"s","seq":5,"ts":\#(h.ts),"uid":"b","reason":"left"}"#,
    ])
    h.send(2, #"{"type":"message.send","id":"m","session":"s","data":1}"#)
    #expect(h.out() == [#"c2 <- {"type":"error","re":"m","code":"not_in_session","message":"not in session s"}"#])
  }

  @Test func leavingASessionNotJoinedIsNotInSession() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"session.leave","id":"l","session":"nowhere"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"l","code":"not_in_session","message":"not in session nowhere"}"#])
  }

  @Test func takeoverFromAnotherConnectionReplacesQuietly() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.connect(3, uid: "a")
    h.send(3, #"{"type":"session.join","id":"t","session":"s"}"#)
    let lines = h.out()
    #expect(lines.count == 3)
    #expect(lines[0] == #"c3 <- {"type":"ok","re":"t"}"#)
    #expect(lines[1] == #"c1 <- {"type":"session.left","session":"s","reason":"replaced"}"#)
    #expect(lines[2].hasPrefix(#"c3 <- {"type":"session.joined","session":"s","seq":2,"#))
    #expect(delivered(to: 2, lines).isEmpty)  // members see nothing when not lost
    // The old connection stays open and is no longer a member; the new one is.
    h.send(1, #"{"type":"ping","id":"p"}"#)
    h.send(1, #"{"type":"hand.raise","id":"r","session":"s"}"#)
    h.send(3, #"{"type":"hand.raise","session":"s"}"#)
    let after = h.out()
    #expect(after[0] == #"c1 <- {"type":"pong","re":"p"}"#)
    #expect(after[1].contains(#""code":"not_in_session""#))
    #expect(after[2].hasPrefix(#"c3,c2 <- {"type":"hand.raised","session":"s","seq":3"#))
    // Closing the replaced connection does not remove the participant.
    h.core.closed(ConnectionID(1), clean: true, at: h.now)
    #expect(h.out().isEmpty)
  }

  @Test func rejoinFromSameConnectionResendsSnapshot() {
    let h = Harness()
    h.join(1, uid: "a")
    h.send(1, #"{"type":"session.join","id":"again","session":"s"}"#)
    let lines = h.out()
    #expect(lines.count == 2)
    #expect(lines[1].hasPrefix(#"c1 <- {"type":"session.joined","session":"s","seq":1,"#))
  }

  @Test func hostRemovesParticipant() {
    let h = Harness()
    h.join(1, uid: "host", role: "host")
    h.join(2, uid: "p")
    h.join(3, uid: "q")
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(1, #"{"type":"participant.remove","id":"r","session":"s","uid":"p"}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"ok","re":"r"}"#,
      #"c2 <- {"type":"session.left","session":"s","reason":"removed"}"#,
      #"c1,c3 <- {"type":"hand.lowered","session":"s","seq":5,"ts":\#(h.ts),"uid":"p","by":"host","reason":"removed"}"#,
      #"c1,c3 <- {"type":"participant.left","session":"s","seq":6,"ts":\#(h.ts),"uid":"p","reason":"removed"}"#,
    ])
  }

  @Test func removalRules() {
    let h = Harness()
    h.join(1, uid: "host", role: "host")
    h.join(2, uid: "p")
    h.connect(3, uid: "outsider", role: "host")
    h.send(2, #"{"type":"participant.remove","id":"1","session":"s","uid":"host"}"#)
    h.send(1, #"{"type":"participant.remove","id":"2","session":"s","uid":"ghost"}"#)
    h.send(3, #"{"type":"participant.remove","id":"3","session":"s","uid":"p"}"#)
    #expect(h.out() == [
      #"c2 <- {"type":"error","re":"1","code":"forbidden","message":"host role required"}"#,
      #"c1 <- {"type":"error","re":"2","code":"not_found","message":"no participant ghost"}"#,
      #"c3 <- {"type":"error","re":"3","code":"not_in_session","message":"not in session s"}"#,
    ])
  }

  @Test func sessionFull() {
    let h = Harness { $0.maxParticipants = 2 }
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.connect(3, uid: "c")
    h.send(3, #"{"type":"session.join","id":"x","session":"s"}"#)
    #expect(h.out() == [#"c3 <- {"type":"error","re":"x","code":"session_full","message":"session s is full"}"#])
    // A member's takeover is not a new participant: still allowed.
    h.connect(4, uid: "a")
    h.send(4, #"{"type":"session.join","id":"y","session":"s"}"#)
    #expect(h.out().first == #"c4 <- {"type":"ok","re":"y"}"#)
  }

  @Test func tooManySessionsPerConnectionIsRateLimited() {
    let h = Harness { $0.maxSessionsPerConnection = 2 }
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"session.join","session":"s1"}"#)
    h.send(1, #"{"type":"session.join","session":"s2"}"#)
    _ = h.out()
    h.send(1, #"{"type":"session.join","id":"3","session":"s3"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"3","code":"rate_limited","message":"at most 2 sessions per connection"}"#])
    h.send(1, #"{"type":"session.leave","session":"s1"}"#)
    _ = h.out()
    h.send(1, #"{"type":"session.join","id":"4","session":"s3"}"#)
    #expect(h.out().first == #"c1 <- {"type":"ok","re":"4"}"#)
  }

  @Test func closeLeavesEverySession() {
    let h = Harness()
    h.join(1, uid: "a", session: "s1")
    h.send(1, #"{"type":"session.join","session":"s2"}"#)
    h.join(2, uid: "b", session: "s1")
    h.join(3, uid: "c", session: "s2")
    h.core.closed(ConnectionID(1), clean: true, at: h.now)
    #expect(h.out() == [
      #"c2 <- {"type":"participant.left","session":"s1","seq":3,"ts":\#(h.ts),"uid":"a","reason":"left"}"#,
      #"c3 <- {"type":"participant.left","session":"s2","seq":3,"ts":\#(h.ts),"uid":"a","reason":"left"}"#,
    ])
    // Unclean close: treated as a leave until heartbeats/grace land (connectionLost hook).
    h.core.closed(ConnectionID(3), clean: false, at: h.now)
    #expect(h.out().isEmpty)  // c was alone in s2 now
    #expect(h.core.stats.connections == 1)
  }

  @Test func emptiedSessionIsDropped() {
    let h = Harness()
    h.join(1, uid: "a")
    #expect(h.core.sessionInfo("s") != nil)
    h.send(1, #"{"type":"session.leave","session":"s"}"#)
    #expect(h.core.sessionInfo("s") == nil)
  }

  @Test func seqIsContinuousForEveryMember() {
    let h = Harness()
    var lines: [String] = []
    h.join(1, uid: "u1", role: "host")
    for n in UInt64(2)...5 {
      h.connect(n, uid: "u\(n)")
      h.send(n, #"{"type":"session.join","session":"s"}"#)
      lines += h.out()
    }
    for n in UInt64(1)...5 { h.send(n, #"{"type":"hand.raise","session":"s"}"#) }
    h.send(3, #"{"type":"message.send","session":"s","data":{"k":[1,2]}}"#)
    h.send(1, #"{"type":"hand.lower","session":"s","uid":"u4"}"#)
    h.send(2, #"{"type":"session.leave","session":"s"}"#)
    h.send(1, #"{"type":"hand.lower_all","session":"s"}"#)
    lines += h.out()
    for n in UInt64(2)...5 {
      let seqs = delivered(to: n, lines).compactMap(seqOf)
      #expect(seqs == Array(seqs.first!...seqs.last!), "member c\(n) saw \(seqs)")
    }
    let seqs1 = delivered(to: 1, lines).compactMap(seqOf)
    #expect(seqs1 == Array(2...seqs1.last!))
  }
}
