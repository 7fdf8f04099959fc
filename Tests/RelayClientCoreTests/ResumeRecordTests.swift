// The kept place across a relaunch (ResumeRecord, ClientMachine.restore): what is
// stored, how it reads back, and what the first hello and welcome do with it (§9).

@testable import RelayClientCore
import RelayProtocol
import Testing

@Suite struct ResumeRecordTests {
  /// A machine connected and in `room` at seq 3, with bob's hand after alice's.
  static func placed() -> Harness {
    var h = Harness()
    h.connectAndWelcome(token: "rt-9")
    h.server(Harness.joined("room", seq: 1, members: ["alice", "bob"], hands: ["alice"]))
    h.server(Harness.hand("hand.raised", "room", seq: 2, uid: "bob"))
    h.server(Harness.message("room", seq: 3))
    return h
  }

  @Test("the record holds the token and each session at its seq, and reads back equal")
  func roundTrip() throws {
    let h = Self.placed()
    let record = try #require(h.machine.resumeRecord(relay: "ws://r/v1/ws"))
    #expect(record.token == "rt-9")
    #expect(record.uid == "bob")
    #expect(record.sessions.map(\.seq) == [3])
    #expect(record.sessions.first?.hands.map(\.uid) == ["alice", "bob"])
    #expect(ResumeRecord(decoding: record.encoded()) == record)
    for broken in ["", "{}", #"{"v":2,"relay":"x","token":"t","sessions":[]}"#, #"{"v":1,"relay":"x","token":"t","sessions":[{}]}"#] {
      #expect(ResumeRecord(decoding: Array(broken.utf8)) == nil, "\(broken)")
    }
  }

  @Test("seq-only changes keep the membership; a new token or session does not")
  func membership() throws {
    var h = Self.placed()
    let before = try #require(h.machine.resumeRecord(relay: "r"))
    h.server(Harness.message("room", seq: 4))
    let after = try #require(h.machine.resumeRecord(relay: "r"))
    #expect(after != before && after.sameMembership(as: before))
    h.server(Harness.joined("other", seq: 1, members: ["bob"]))
    #expect(!(try #require(h.machine.resumeRecord(relay: "r"))).sameMembership(as: before))
  }

  @Test("a restored place: hello resumes it; resumed welcome keeps it and replays onto it")
  func restoredResumes() throws {
    let record = try #require(Self.placed().machine.resumeRecord(relay: "r"))
    var h = Harness()
    h.machine.restore(record)
    #expect(h.machine.resumeRecord(relay: "r") == record, "unchanged until connected: nothing to write")
    h.run { m, now in m.connect(nowMs: now) }
    let hello = try #require(h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent)
    #expect(hello["resume"]?["token"]?.stringValue == "rt-9")
    #expect(hello["resume"]?["sessions"]?["room"]?.numberValue?.int64 == 3)
    let effects = h.server(h.welcome(resumed: true, token: "rt-10"))
    #expect(h.machine.snapshot.resumed)
    #expect(effects.sentTypes.filter { $0 == "session.join" }.isEmpty)
    #expect(effects.events.contains(.connectionRestored))
    h.server(Harness.message("room", seq: 4))
    #expect(h.machine.snapshot.sessions["room"]?.seq == 4)
    #expect(h.machine.snapshot.sessions["room"]?.hands.map(\.uid) == ["alice", "bob"])
    #expect(h.machine.resumeRecord(relay: "r")?.token == "rt-10")
  }

  @Test("a restored place the relay no longer holds is joined again; another user's is dropped")
  func restoredNotHeld() throws {
    let record = try #require(Self.placed().machine.resumeRecord(relay: "r"))
    var h = Harness()
    h.machine.restore(record)
    #expect(h.connectAndWelcome(resumed: false).sentTypes.contains("session.join"))
    #expect(!h.machine.snapshot.resumed)

    var other = record
    other.uid = "carol"
    var c = Harness()
    c.machine.restore(other)
    #expect(!c.connectAndWelcome(resumed: false).sentTypes.contains("session.join"))
    #expect(c.machine.snapshot.sessions.isEmpty)
  }

  @Test("disconnect ends the place: no record to keep")
  func disconnectForgets() {
    var h = Self.placed()
    h.run { m, now in m.disconnect(nowMs: now) }
    #expect(h.machine.resumeRecord(relay: "r") == nil)
  }
}
