// §5 heartbeats and connection status, with injected time: the shell's heartbeats
// (the harness runs RelayPrimitives `Heartbeats` as the server does) and the core's
// lost, grace and resume.
import RelayProtocol
import Testing

@testable import RelayCore

/// Short §5 timings used by these tests.
func shortTimings(_ c: inout CoreConfig) {
  c.heartbeatIntervalMs = 1_000
  c.heartbeatTimeoutMs = 3_000
  c.graceMs = 5_000
  c.backgroundGraceMs = 20_000
  c.idleTimeoutMs = 1_000_000
}

/// Types of the messages delivered to connection `n`.
func types(to n: UInt64, _ lines: [String]) -> [String] {
  delivered(to: n, lines).compactMap(typeOf)
}

extension Harness {
  /// a (c1) and b (c2) in session "s"; drains.
  static func pair(_ configure: (inout CoreConfig) -> Void = shortTimings) -> Harness {
    let h = Harness(configure: configure)
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    _ = h.out()
    return h
  }

  /// Advances in `step` ms increments, keeping the listed connections alive (a pong
  /// for every step), and collects everything produced.
  func run(_ ms: Int64, step: Int64 = 100, alive: [UInt64] = [1]) -> [String] {
    var lines: [String] = []
    var elapsed: Int64 = 0
    while elapsed < ms {
      advance(min(step, ms - elapsed))
      elapsed += step
      for n in alive { self.alive(n) }
      lines += out()
    }
    return lines
  }

  func statuses(_ session: String = "s") -> [String] {
    core.debugSnapshot(session: session)?.participants.map(\.description) ?? []
  }
}

@Suite struct LivenessTests {
  @Test func pingsEveryIntervalWhileAlive() {
    let h = Harness.pair()
    let lines = h.run(3_000, step: 500, alive: [1, 2])
    #expect(lines.filter { $0 == "ping c1" }.count == 3)
    #expect(lines.filter { $0 == "ping c2" }.count == 3)
    #expect(!lines.contains { $0.contains("participant.lost") })
  }

  @Test func silentConnectionIsLostAndDropped() {
    let h = Harness.pair()
    var lines = h.run(2_900, alive: [1])
    #expect(!lines.contains { $0.contains("participant.lost") })
    lines = h.run(200, alive: [1])
    #expect(types(to: 1, lines) == ["participant.lost"])
    #expect(delivered(to: 1, lines).first?.contains(#""seq":3"#) == true)
    #expect(lines.contains("drop c2"))
    #expect(h.statuses() == ["a:connected", "b:lost"])
    #expect(!h.core.debugIsUserOnline("b"))
    // The shell then reports the socket gone: nothing more happens.
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    #expect(h.out().isEmpty)
  }

  @Test func anyInboundFrameProvesLiveness() {
    let h = Harness.pair()
    // b only sends app-level pings, never pongs: still alive.
    var lines: [String] = []
    for _ in 0..<10 {
      lines += h.run(1_000, alive: [1])
      h.send(2, #"{"type":"ping"}"#)
      lines += h.out()
    }
    #expect(!lines.contains { $0.contains("participant.lost") })
    #expect(h.statuses() == ["a:connected", "b:connected"])
  }

  @Test func oneHeartbeatCheckPerConnectionWhateverTheTraffic() {
    let h = Harness.pair()
    let before = (h.core.debugDeadlineCount, h.heartbeats.pendingChecks)
    for _ in 0..<1_000 {
      h.now.monoMs += 1
      h.alive(2)
    }
    // A frame costs the shell a store and the core nothing: no check filed, no deadline.
    #expect(h.core.debugDeadlineCount == before.0)
    #expect(h.heartbeats.pendingChecks == before.1)
  }

  /// The core arms no §5 timer of its own: with both heartbeat settings on, a silent
  /// connection is never lost unless the shell reports it closed.
  @Test func theCoreHasNoHeartbeatsOfItsOwn() {
    let h = Harness.pair()
    h.now.monoMs += 60_000
    while let next = h.core.nextDeadline, next <= h.now.monoMs { h.core.tick(at: h.now) }
    #expect(h.core.takeEffects().isEmpty)
    #expect(h.statuses() == ["a:connected", "b:connected"])
  }

  @Test func uncleanCloseIsLostThenTimedOutAfterGrace() {
    let h = Harness.pair()
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    let lost = h.out()
    #expect(types(to: 1, lost) == ["participant.lost"])
    #expect(h.core.debugSnapshot(session: "s")?.hands == ["b"])  // hand kept
    var lines = h.run(4_900)
    #expect(types(to: 1, lines).isEmpty)
    lines = h.run(200)
    let got = delivered(to: 1, lines)
    #expect(got.map { typeOf($0) } == ["hand.lowered", "participant.timed_out"])
    #expect(got.first?.contains(#""by":null,"reason":"timed_out""#) == true)
    #expect(got.map(seqOf) == [5, 6])
    #expect(h.statuses() == ["a:connected"])
    #expect(h.core.stats.lost == 1 && h.core.stats.timedOut == 1)
  }

  @Test func cleanCloseLeavesAtOnce() {
    let h = Harness.pair()
    h.core.closed(ConnectionID(2), clean: true, at: h.now)
    let got = delivered(to: 1, h.out())
    #expect(got.count == 1)
    #expect(got.first?.contains(#""type":"participant.left""#) == true)
    #expect(got.first?.contains(#""reason":"left""#) == true)
    #expect(h.statuses() == ["a:connected"])
  }

  @Test func backgroundGraceIsHonoured() {
    let h = Harness.pair()
    h.send(2, #"{"type":"client.background","background":true}"#)
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    _ = h.out()
    var lines = h.run(19_900)
    #expect(types(to: 1, lines).isEmpty)
    #expect(h.statuses() == ["a:connected", "b:lost"])
    lines = h.run(200)
    #expect(types(to: 1, lines) == ["participant.timed_out"])
  }

  @Test func backgroundFalseRestoresNormalGrace() {
    let h = Harness.pair()
    h.send(2, #"{"type":"client.background","background":true}"#)
    h.send(2, #"{"type":"client.background","background":false}"#)
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    _ = h.out()
    #expect(types(to: 1, h.run(5_100)) == ["participant.timed_out"])
  }

  @Test func rejoinFromNewConnectionWithinGraceRestores() {
    let h = Harness.pair()
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    _ = h.out()
    _ = h.run(1_000)
    h.connect(3, uid: "b")
    h.send(3, #"{"type":"session.join","session":"s"}"#)
    let lines = h.out()
    #expect(types(to: 1, lines) == ["participant.restored"])
    let joined = delivered(to: 3, lines).first { typeOf($0) == "session.joined" }
    #expect(joined.flatMap(seqOf) == 4)  // snapshot after the restored event (§5)
    #expect(h.statuses() == ["a:connected", "b:connected"])
    // The old grace ends without effect.
    #expect(types(to: 1, h.run(6_000, alive: [1, 3])).isEmpty)
  }

  @Test func lostInEverySessionOfTheConnection() {
    let h = Harness(configure: shortTimings)
    h.join(1, uid: "a", session: "x")
    h.send(1, #"{"type":"session.join","session":"y"}"#)
    h.join(2, uid: "b", session: "x")
    h.send(2, #"{"type":"session.join","session":"y"}"#)
    _ = h.out()
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    let got = delivered(to: 1, h.out())
    #expect(got.count == 2)
    #expect(got.allSatisfy { typeOf($0) == "participant.lost" })
    #expect(h.statuses("x") == ["a:connected", "b:lost"])
    #expect(h.statuses("y") == ["a:connected", "b:lost"])
  }

  @Test func lostAgainAfterRestoreUsesTheNewGrace() {
    let h = Harness.pair()
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    _ = h.run(3_000)
    h.connect(3, uid: "b")
    h.send(3, #"{"type":"session.join","session":"s"}"#)
    _ = h.out()
    h.core.closed(ConnectionID(3), clean: false, at: h.now)
    _ = h.out()
    // First grace ends at +5 000 from the first loss: b stays lost (second loss).
    #expect(types(to: 1, h.run(2_500)).isEmpty)
    #expect(h.statuses() == ["a:connected", "b:lost"])
    #expect(types(to: 1, h.run(2_600)) == ["participant.timed_out"])
  }

  @Test func silentBeforeHelloIsDroppedWithoutEvents() {
    let h = Harness(configure: shortTimings)
    h.open(1)
    let lines = h.run(3_100, alive: [])
    #expect(lines.contains("drop c1"))
  }

  @Test func userOnlineReflectsLiveConnections() {
    let h = Harness.pair()
    #expect(h.core.debugIsUserOnline("b"))
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    #expect(!h.core.debugIsUserOnline("b"))
  }
}
