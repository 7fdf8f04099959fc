// protocol/ §5.6 on the client machine: it offers `presence.diff` in hello and applies a
// `participants.diff` event by event, so the app sees the per-member events.

@testable import RelayClientCore
import RelayProtocol
import Testing

@Suite struct PresenceDiffClientTests {
  @Test("hello offers presence.diff; a diff yields the same events as its members sent alone")
  func diffIsAppliedEventByEvent() {
    var h = Harness()
    h.run { m, now in m.connect(nowMs: now) }
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["capabilities"]?.arrayValue?.first?.stringValue == "presence.diff")
    h.server(h.welcome(resumed: false))
    h.server(Harness.joined("room", seq: 3, members: ["alice", "bob"]))
    let joined = #"{"type":"participant.joined","session":"room","seq":4,"ts":5,"participant":{"uid":"dave","name":"dave","role":"participant","joinedAt":1,"status":"connected"}}"#
    let left = #"{"type":"participant.left","session":"room","seq":5,"ts":6,"uid":"alice","reason":"left"}"#
    let diff = h.server(#"{"type":"participants.diff","session":"room","seqFrom":4,"seq":5,"ts":6,"events":[\#(joined),\#(left)]}"#)
    #expect(diff.events.count == 2)
    #expect(h.machine.snapshot.sessions["room"]?.seq == 5)
    #expect(h.machine.snapshot.sessions["room"]?.participants.map(\.uid).sorted() == ["bob", "dave"])
    // A replay of the same events one by one afterwards is a duplicate, dropped.
    #expect(h.server(left).events.isEmpty)
  }
}
