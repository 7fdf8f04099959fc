// The Swift-concurrency surface beside the listener one, against the real relay:
// `for await event in client.events`, typed command results, and listeners that a
// `@MainActor` model registers as itself (an isolated conformance, no adapter).

import Foundation
import Testing

@testable import RelayClient

/// What an app's view model looks like: main-actor state, the SDK's listener
/// protocols conformed to on the main actor, registered with `self`.
@MainActor
final class RoomModel {
  var participants: [String] = []
  var hands: [String] = []
  var lines: [String] = []

  init(client: RelayClient) {
    client.addParticipantEventListener(id: "model", self)
    client.addSessionStatusListener(id: "model", self)
  }

  /// Traps unless on the main actor: what a conformance isolated to it guarantees
  /// (on Linux the main queue is drained by a worker thread, so not `isMainThread`).
  func note(_ line: String) {
    MainActor.assertIsolated()
    dispatchPrecondition(condition: .onQueue(.main))
    lines.append(line)
  }
}

extension RoomModel: @MainActor ParticipantEventListener {
  func onParticipantJoined(_ participant: Participant, sessionID: String) {
    participants.append(participant.uid)
    note("joined \(participant.uid)")
  }

  func onParticipantHandRaised(_ hand: RaisedHand, sessionID: String) {
    hands.append(hand.uid)
    note("hand \(hand.uid)")
  }
}

extension RoomModel: @MainActor SessionStatusListener {
  func onSessionJoined(_ session: SessionState) { note("session \(session.id)") }
}

@Suite(.serialized) struct ModernSurfaceLiveTests {
  @Test("for await over client.events sees the events in relay order; joinSession returns the SessionState")
  func eventsSequenceAndTypedJoin() async throws {
    let relay = try RelayProcess([])
    let alice = RelayClient(url: relay.url, auth: dev("alice", host: true))
    let bob = RelayClient(url: relay.url, auth: dev("bob"))
    let events = alice.events  // subscribed before anything happens
    try await alice.connect()
    try await bob.connect()

    let room: SessionState = try await alice.joinSession(sessionID: "room")
    #expect(room.id == "room")
    #expect(room.participants.map(\.uid) == ["alice"])
    #expect(room.selfUID == "alice")
    let seen: SessionState = try await bob.joinSession(sessionID: "room")
    #expect(seen.participants.map(\.uid) == ["alice", "bob"])
    try await bob.raiseHand(sessionID: "room")
    try await bob.sendMessage(.string("hi"), sessionID: "room")

    var got: [String] = []
    let reader = Task {
      var lines: [String] = []
      for await event in events {
        switch event {
        case .sessionJoined(let s, _): lines.append("sessionJoined \(s.id)")
        case .participantJoined(let s, let p): lines.append("participantJoined \(s) \(p.uid)")
        case .handRaised(let s, let hand): lines.append("handRaised \(s) \(hand.uid)")
        case .messageReceived(let s, let from, let data, _, _):
          lines.append("message \(s) \(from) \(data.stringValue ?? "")")
          return lines
        default: lines.append("other")
        }
      }
      return lines
    }
    let timeout = Task {
      try await Task.sleep(for: .seconds(10))
      reader.cancel()
    }
    got = await reader.value
    timeout.cancel()
    #expect(got == ["sessionJoined room", "participantJoined room bob", "handRaised room bob", "message room bob hi"])

    // A second subscription starts from its own first event; a cancelled loop ends.
    let later = alice.events
    try await bob.lowerHand(sessionID: "room")
    var iterator = later.makeAsyncIterator()
    let next = await iterator.next()
    #expect(next == .handLowered(session: "room", uid: "bob", by: "bob", reason: "self"))

    // Typed failure, as before.
    await #expect(throws: RelayError.self) { try await bob.joinSession(sessionID: "") }
    alice.disconnect()
    bob.disconnect()
    relay.stop()
  }

  @Test(
    "a @MainActor model registers itself as listener and is called on the main actor",
    arguments: [false, true])
  @MainActor
  func mainActorListeners(mainCallbackQueue: Bool) async throws {
    let relay = try RelayProcess([])
    // The Linux default callback queue is a private one: the SDK still calls the
    // model on the main actor, because it registered from there. With the main
    // queue as callback queue (the Apple default) it is called there directly.
    let alice = RelayClient(url: relay.url, auth: dev("alice"), callbackQueue: mainCallbackQueue ? .main : nil)
    let bob = RelayClient(url: relay.url, auth: dev("bob"))
    let model = RoomModel(client: alice)
    try await alice.connect()
    try await bob.connect()
    try await alice.joinSession(sessionID: "room")
    try await bob.joinSession(sessionID: "room")
    try await bob.raiseHand(sessionID: "room")
    let deadline = Date().addingTimeInterval(10)
    while model.hands.isEmpty && Date() < deadline { try await Task.sleep(for: .milliseconds(20)) }
    #expect(model.lines == ["session room", "joined bob", "hand bob"])
    alice.disconnect()
    bob.disconnect()
    relay.stop()
  }
}
