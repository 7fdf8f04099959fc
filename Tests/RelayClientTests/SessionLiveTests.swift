// RelayClient against the real relay: sessions, the hand queue, messages, removal,
// idle and participant timeouts, every session/participant listener callback.

import Foundation
import Testing

@testable import RelayClient

@Suite(.serialized) struct SessionLiveTests {
  @Test("dev auth: join, hand queue in raise order with re-raise to the back, host lowering, messages")
  func handsAndMessages() async throws {
    let relay = try RelayProcess(["--heartbeat-interval", "500", "--heartbeat-timeout", "2000"])
    let (alice, ra) = makeClient(relay, dev("alice", host: true))
    let (bob, rb) = makeClient(relay, dev("bob"))
    let (carol, rc) = makeClient(relay, dev("carol"))
    for c in [alice, bob, carol] { try await c.connect() }
    #expect(alice.connectionState == .connected)
    #expect(alice.state.user?.uid == "alice")

    try await alice.joinSession(sessionID: "room")
    #expect(alice.state.sessions["room"]?.participants.map(\.uid) == ["alice"])
    try await bob.joinSession(sessionID: "room")
    try await carol.joinSession(sessionID: "room")
    await ra.wait(for: "participantJoined room carol")
    await rb.wait(for: "participantJoined room carol")
    #expect(rc.all.contains("sessionJoined room"))
    #expect(Set(carol.state.participants(in: "room").map(\.uid)) == ["alice", "bob", "carol"])

    // §7: queue order is raise order; a re-raise after lowering goes to the back.
    try await bob.raiseHand(sessionID: "room")
    try await carol.raiseHand(sessionID: "room")
    try await bob.lowerHand(sessionID: "room")
    try await bob.raiseHand(sessionID: "room")
    for r in [ra, rb, rc] {
      await r.wait(10, "queue") { $0.filter { $0.hasPrefix("handRaised room") }.count == 3 }
    }
    for c in [alice, bob, carol] { #expect(c.state.raisedHands(in: "room").map(\.uid) == ["carol", "bob"]) }
    #expect(ra.all.contains("handLowered room bob self"))
    // A late joiner's snapshot lists the hands in queue order (§7).
    let (dave, _) = makeClient(relay, dev("dave"))
    try await dave.connect()
    try await dave.joinSession(sessionID: "room")
    let late = dave.state.raisedHands(in: "room")
    #expect(late.map(\.uid) == ["carol", "bob"])
    #expect(late[0].raisedAt <= late[1].raisedAt)
    try await dave.leaveSession(sessionID: "room")

    // Participants act only on themselves; hosts may lower others (§3, §7).
    do {
      try await bob.lowerHand(uid: "carol", sessionID: "room")
      Issue.record("a participant lowered another's hand")
    } catch { #expect(error.code == .forbidden) }
    try await alice.lowerHand(uid: "carol", sessionID: "room")
    await rb.wait(for: "handLowered room carol host")
    #expect(bob.state.raisedHands(in: "room").map(\.uid) == ["bob"])
    try await alice.lowerAllHands(sessionID: "room")
    await rc.wait(for: "handLowered room bob cleared")
    #expect(carol.state.raisedHands(in: "room").isEmpty)

    // §7a: every member, the sender included, gets the message.
    try await bob.sendMessage(.object(JSONObject([("n", .number(JSONNumber(7)))])), sessionID: "room")
    for r in [ra, rb, rc] { await r.wait(for: "message room bob 7") }

    // Removal and leaving (§6).
    try await alice.removeParticipant(uid: "carol", sessionID: "room")
    await rc.wait(for: "sessionLeft room removed")
    await rb.wait(for: "participantLeft room carol removed")
    #expect(carol.state.sessions["room"] == nil)
    try await bob.leaveSession(sessionID: "room")
    #expect(rb.all.contains("sessionLeft room left"))
    await ra.wait(for: "participantLeft room bob left")
    #expect(alice.state.participants(in: "room").map(\.uid) == ["alice"])
    await #expect(throws: RelayError.self) { try await bob.raiseHand(sessionID: "room") }

    alice.disconnect()
    await ra.wait(for: "connectionClosed 1000")
    #expect(alice.connectionState == .disconnected)
    relay.stop()
  }

  @Test("a client the app lets go of shuts down with a close frame (a leave, not a loss)")
  func releasedClientLeaves() async throws {
    let relay = try RelayProcess([])
    let (alice, ra) = makeClient(relay, dev("alice"))
    try await alice.connect()
    try await alice.joinSession(sessionID: "room")
    var bob: RelayClient? = RelayClient(url: relay.url, auth: dev("bob"))
    try await bob?.connect()
    try await bob?.joinSession(sessionID: "room")
    await ra.wait(for: "participantJoined room bob")
    bob = nil
    // §5: a clean close is a leave, not a loss.
    await ra.wait(for: "participantLeft room bob left")
    #expect(!ra.all.contains("participantLost room bob"))
    relay.stop()
  }

  @Test("idle warning, session timeout, participant lost then timed out")
  func timeouts() async throws {
    let relay = try RelayProcess([
      "--idle-timeout", "1500", "--grace", "800", "--heartbeat-interval", "500", "--heartbeat-timeout", "2000",
    ])
    let (alice, ra) = makeClient(relay, dev("alice"))
    let (dave, _) = makeClient(relay, dev("dave"))
    try await alice.connect()
    try await dave.connect()
    try await alice.joinSession(sessionID: "lonely")
    await ra.wait(for: "idleWarning lonely")
    await ra.wait(for: "sessionTimedOut lonely")
    #expect(alice.state.sessions["lonely"] == nil)

    try await alice.joinSession(sessionID: "room")
    try await dave.joinSession(sessionID: "room")
    try await dave.raiseHand(sessionID: "room")
    await ra.wait(for: "handRaised room dave")
    dave.abandonForTesting()
    await ra.wait(for: "participantLost room dave")
    #expect(alice.state.sessions["room"]?.participant("dave")?.status == .lost)
    await ra.wait(for: "participantTimedOut room dave")
    #expect(ra.all.contains("handLowered room dave timed_out"))
    #expect(alice.state.participants(in: "room").map(\.uid) == ["alice"])
    relay.stop()
  }
}
