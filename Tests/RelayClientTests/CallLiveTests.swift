// RelayClient against the real relay: ringing (§9) with every call listener
// callback, two devices of one callee, and a call still ringing at `welcome`.

import Foundation
import Testing

@testable import RelayClient

@Suite(.serialized) struct CallLiveTests {
  @Test("two devices ring; one accepts, the other is cancelled answered_elsewhere; busy; end")
  func acceptOnOneDevice() async throws {
    let relay = try RelayProcess(["--ring-timeout", "5000"])
    let (alice, ra) = makeClient(relay, dev("alice"))
    let (phone, rp) = makeClient(relay, dev("bob"))
    let (laptop, rl) = makeClient(relay, dev("bob"))
    let (carol, rc) = makeClient(relay, dev("carol"))
    for c in [alice, phone, laptop, carol] { try await c.connect() }

    let call = try await alice.initiateCall(to: ["bob"], callType: .video, metadata: JSONObject([("topic", .string("demo"))]))
    #expect(call.direction == .outgoing)
    #expect(alice.state.calls[call.id]?.status == .ringing)
    await rp.wait(for: "incoming alice")
    await rl.wait(for: "incoming alice")
    #expect(rp.lastCall()?.metadata?["topic"]?.stringValue == "demo")
    #expect(rp.lastCall()?.callType == .video)

    try await phone.acceptCall(callID: call.id)
    await ra.wait(for: "accepted bob")
    await rl.wait(for: "cancelled answered_elsewhere")
    #expect(alice.state.calls[call.id]?.status == .accepted)
    // The accepter's own `call.accepted` follows the `ok` that ended the await (§2).
    await rp.wait(10, "phone's call.accepted") { _ in phone.state.calls[call.id]?.status == .accepted }
    #expect(laptop.state.calls[call.id]?.status == .cancelled)

    // §9: a callee in an accepted call is busy.
    _ = try await carol.initiateCall(to: ["bob"], callType: .audio)
    await rc.wait(for: "busy bob")

    try await alice.endCall(callID: call.id)
    await rp.wait(for: "ended alice ended")
    await ra.wait(for: "ended alice ended")
    #expect(phone.state.calls[call.id]?.status == .ended)
    relay.stop()
  }

  @Test("reject, cancel, unanswered, and a call ringing when the callee connects")
  func otherOutcomes() async throws {
    let relay = try RelayProcess(["--ring-timeout", "1500"])
    let (alice, ra) = makeClient(relay, dev("alice"))
    let (dave, rd) = makeClient(relay, dev("dave"))
    try await alice.connect()
    try await dave.connect()

    let rejected = try await alice.initiateCall(to: ["dave"], callType: .audio)
    await rd.wait(for: "incoming alice")
    try await dave.rejectCall(callID: rejected.id)
    await ra.wait(for: "rejected dave declined")
    #expect(alice.state.calls[rejected.id]?.status == .rejected)

    let cancelled = try await alice.initiateCall(to: ["dave"], callType: .audio)
    await rd.wait(10, "second ring") { $0.filter { $0 == "incoming alice" }.count == 2 }
    try await alice.cancelCall(callID: cancelled.id)
    await rd.wait(for: "cancelled cancelled")

    let unanswered = try await alice.initiateCall(to: ["dave"], callType: .audio)
    await ra.wait(for: "unanswered dave")
    await rd.wait(for: "cancelled unanswered")
    #expect(alice.state.calls[unanswered.id]?.status == .unanswered)

    // §4 step 2: a callee who connects while the call rings hears it after `welcome`.
    let ringing = try await alice.initiateCall(to: ["erin"], callType: .video)
    let (erin, re) = makeClient(relay, dev("erin"))
    try await erin.connect()
    await re.wait(for: "incoming alice")
    #expect(erin.state.calls[ringing.id]?.status == .ringing)
    try await erin.acceptCall(callID: ringing.id)
    await ra.wait(for: "accepted erin")

    // Errors carry the protocol's codes (§2).
    do {
      try await erin.acceptCall(callID: "no-such-call")
      Issue.record("accepting an unknown call succeeded")
    } catch { #expect(error.code == .notFound) }
    relay.stop()
  }
}
