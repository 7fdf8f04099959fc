// protocol/ §5.6: membership events coalesced per session per turn into
// `participants.diff` for connections that offered `presence.diff`; everyone else,
// and every replay, keeps the per-event stream.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct PresenceDiffTests {
  /// Hello offering the capability; drains the welcome and returns it.
  @discardableResult
  func connectDiff(_ h: Harness, _ n: UInt64, uid: String, offer: String = #"["presence.diff"]"#) -> String {
    h.open(n)
    h.send(n, #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid)"},"capabilities":\#(offer)}"#)
    return delivered(to: n, h.out()).first ?? ""
  }

  func joinDiff(_ h: Harness, _ n: UInt64, uid: String, session: String = "s") {
    connectDiff(h, n, uid: uid)
    h.send(n, #"{"type":"session.join","session":"\#(session)"}"#)
    _ = h.out()
  }

  /// An old client joins; what was produced before its hello is kept in `lines`.
  func joinPlain(_ h: Harness, _ n: UInt64, uid: String, _ lines: inout [String]) {
    lines += h.out()
    h.connect(n, uid: uid)
    h.send(n, #"{"type":"session.join","session":"s"}"#)
  }

  /// The seqs a connection saw, expanding diffs into their events.
  func seqs(_ lines: [String], _ n: UInt64) -> [Int64] {
    delivered(to: n, lines).flatMap { json -> [Int64] in
      guard let value = try? JSONParser.parse(json) else { return [] }
      if value["type"]?.stringValue == "participants.diff" {
        return value["events"]?.arrayValue?.compactMap { $0["seq"]?.numberValue?.int64 } ?? []
      }
      return value["seq"]?.numberValue?.int64.map { [$0] } ?? []
    }
  }

  @Test func welcomeEchoesAcceptedCapabilitiesOnlyWhenOffered() {
    let h = Harness(configure: withoutHeartbeats)
    let offered = connectDiff(h, 1, uid: "a", offer: #"["presence.diff","future.thing"]"#)
    #expect(offered.contains(#""capabilities":["presence.diff"]"#))
    let unknownOnly = connectDiff(h, 2, uid: "b", offer: #"["future.thing"]"#)
    #expect(unknownOnly.contains(#""capabilities":[]"#))
    h.connect(3, uid: "c")
    h.send(3, #"{"type":"ping","id":"p"}"#)
    _ = h.out()
    h.open(4)
    h.send(4, #"{"type":"hello","dev":{"uid":"d","name":"d"}}"#)
    #expect(!(delivered(to: 4, h.out()).first ?? "").contains("capabilities"))
  }

  @Test func malformedCapabilitiesAreABadRequest() {
    let h = Harness(configure: withoutHeartbeats)
    let reply = connectDiff(h, 1, uid: "a", offer: #""presence.diff""#)
    #expect(typeOf(reply) == "error" && reply.contains("bad_request"))
  }

  @Test func joinsOfOneTurnReachADiffMemberAsOneMessageAndOthersOneEach() {
    let h = Harness(configure: withoutHeartbeats)
    joinDiff(h, 1, uid: "a")  // seq 1
    h.join(2, uid: "old")  // seq 2: a's diff is pending
    h.core.flushPresenceDiffs()
    _ = h.out()
    var lines: [String] = []
    for n in UInt64(3)...6 { joinPlain(h, n, uid: "u\(n)", &lines) }  // seqs 3...6, one turn
    lines += h.out()
    #expect(delivered(to: 1, lines).isEmpty)  // waiting for the end of the turn
    #expect(delivered(to: 2, lines).count == 4)  // the old client: one event each
    h.core.flushPresenceDiffs()
    lines = h.out()
    let toA = delivered(to: 1, lines)
    #expect(toA.count == 1 && typeOf(toA[0]) == "participants.diff")
    #expect(toA[0].contains(#""seqFrom":3,"seq":6"#))
    #expect(seqs(lines, 1) == [3, 4, 5, 6])
    // The late joiners' own runs start after their own join (folded into their snapshot).
    #expect(delivered(to: 3, lines).isEmpty)  // old clients got theirs at once
  }

  @Test func aDiffMemberJoiningMidTurnGetsOnlyWhatFollowsItsSnapshot() {
    let h = Harness(configure: withoutHeartbeats)
    joinDiff(h, 1, uid: "a")
    h.core.flushPresenceDiffs()
    h.join(2, uid: "b")  // seq 2
    connectDiff(h, 3, uid: "c")
    h.send(3, #"{"type":"session.join","session":"s"}"#)  // seq 3, snapshot seq 3
    let snapshot = delivered(to: 3, h.out()).first { typeOf($0) == "session.joined" }
    #expect(snapshot.flatMap(seqOf) == 3)
    h.join(4, uid: "d")  // seq 4
    h.core.flushPresenceDiffs()
    let lines = h.out()
    #expect(seqs(lines, 1) == [2, 3, 4])
    #expect(seqs(lines, 3) == [4])
    #expect(typeOf(delivered(to: 3, lines)[0]) == "participant.joined")  // a lone event goes as itself
  }

  @Test func anyOtherMessageSendsThePendingRunFirst() {
    let h = Harness(configure: withoutHeartbeats)
    joinDiff(h, 1, uid: "a")
    h.core.flushPresenceDiffs()
    var lines: [String] = []
    joinPlain(h, 2, uid: "b", &lines)  // seq 2
    joinPlain(h, 3, uid: "c", &lines)  // seq 3
    h.send(2, #"{"type":"hand.raise","id":"r","session":"s"}"#)  // seq 4, not membership
    joinPlain(h, 4, uid: "d", &lines)  // seq 5
    h.core.flushPresenceDiffs()
    lines += h.out()
    let toA = delivered(to: 1, lines).map { typeOf($0) ?? "" }
    #expect(toA == ["participants.diff", "hand.raised", "participant.joined"])
    #expect(seqs(lines, 1) == [2, 3, 4, 5])
  }

  @Test func leavesAndLossesAreCoalescedAndReplayStaysPerEvent() {
    let h = Harness(configure: withoutHeartbeats)
    joinDiff(h, 1, uid: "a")
    for n in UInt64(2)...4 { h.join(n, uid: "u\(n)") }
    h.core.flushPresenceDiffs()
    _ = h.out()
    h.send(2, #"{"type":"session.leave","session":"s"}"#)  // participant.left, seq 5
    h.core.closed(ConnectionID(3), clean: false, at: h.now)  // participant.lost, seq 6
    h.core.flushPresenceDiffs()
    let lines = h.out()
    let toA = delivered(to: 1, lines)
    #expect(toA.count == 1 && toA[0].contains("participant.left") && toA[0].contains("participant.lost"))
    #expect(seqs(lines, 1) == [5, 6])
    // u4 (an old client) got both, one message each.
    #expect(delivered(to: 4, lines).map { typeOf($0) ?? "" } == ["participant.left", "participant.lost"])
    // a resumes from seq 4 on a new connection: the replay is per event.
    let token = h.resumeToken(of: 1)
    h.core.closed(ConnectionID(1), clean: false, at: h.now)  // seq 7: a lost
    h.open(9)
    h.send(9, #"{"type":"hello","dev":{"uid":"a","name":"a"},"capabilities":["presence.diff"],"resume":{"token":"\#(token)","sessions":{"s":4}}}"#)
    let replay = delivered(to: 9, h.out()).map { typeOf($0) ?? "" }
    #expect(replay.starts(with: ["welcome", "participant.left", "participant.lost", "participant.lost"]))
  }
}
