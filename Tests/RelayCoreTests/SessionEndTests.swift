// §11 `session.ended`: every way a session can lose its last participant sends the
// webhook exactly once, through the core's one removal sequence.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct SessionEndTests {
  static let ended = "webhook session.ended"

  /// Alone in "s" on c1 (uid a), webhooks on, short §5 timings; drains.
  static func alone(_ configure: (inout CoreConfig) -> Void = { _ in }) -> Harness {
    let h = Harness { c in
      shortTimings(&c)
      c.sessionWebhooks = true
      configure(&c)
    }
    h.join(1, uid: "a", role: "host")
    _ = h.out()
    return h
  }

  static func endedCount(_ lines: [String]) -> Int {
    lines.filter { $0.hasPrefix(ended) && $0.contains(#""sessionId":"s""#) }.count
  }

  @Test func leave() {
    let h = Self.alone()
    h.send(1, #"{"type":"session.leave","session":"s"}"#)
    #expect(Self.endedCount(h.out()) == 1)
    #expect(h.core.debugSnapshot(session: "s") == nil)
  }

  @Test func cleanClose() {
    let h = Self.alone()
    h.core.closed(ConnectionID(1), clean: true, at: h.now)
    #expect(Self.endedCount(h.out()) == 1)
  }

  @Test func hostRemovesTheLastOtherThenLeaves() {
    let h = Self.alone()
    h.join(2, uid: "b")
    h.send(1, #"{"type":"participant.remove","session":"s","uid":"b"}"#)
    #expect(Self.endedCount(h.out()) == 0)
    h.send(1, #"{"type":"participant.remove","session":"s","uid":"a"}"#)
    #expect(Self.endedCount(h.out()) == 1)
  }

  @Test func adminRemoval() {
    let h = Self.alone()
    #expect(h.core.removeParticipant(session: "s", uid: "a", at: h.now))
    #expect(Self.endedCount(h.out()) == 1)
  }

  /// Lost, then grace over with nobody left (§5).
  @Test func graceExpiry() {
    let h = Self.alone()
    h.core.closed(ConnectionID(1), clean: false, at: h.now)
    var lines = h.out() + h.run(4_900, alive: [])
    #expect(Self.endedCount(lines) == 0)
    lines = h.run(200, alive: [])
    #expect(Self.endedCount(lines) == 1)
    #expect(h.core.debugSnapshot(session: "s") == nil)
  }

  /// Alone for the idle timeout (§5.5).
  @Test func idleTimeout() {
    let h = Self.alone { $0.idleTimeoutMs = 2_000 }
    var lines = h.run(1_900)
    #expect(Self.endedCount(lines) == 0)
    lines = h.run(200)
    #expect(types(to: 1, lines).contains("session.timed_out"))
    #expect(Self.endedCount(lines) == 1)
    #expect(h.core.debugSnapshot(session: "s") == nil)
  }

  /// A session left by one of two members does not end.
  @Test func notEndedWhileSomeoneRemains() {
    let h = Self.alone()
    h.join(2, uid: "b")
    h.send(2, #"{"type":"session.leave","session":"s"}"#)
    #expect(Self.endedCount(h.out()) == 0)
  }
}
