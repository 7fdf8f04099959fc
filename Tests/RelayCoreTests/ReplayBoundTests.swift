// §8 replay memory: the per-session byte bound and the process-wide budget.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct ReplayBoundTests {
  static func big(_ n: Int) -> Payload { Payload([UInt8](repeating: 0x61, count: n)) }

  @Test func perSessionByteBoundDropsTheOldest() {
    var log = ReplayLog(maxEvents: 1_000, maxAgeMs: 1_000_000, maxBytes: 3 * (1_000 + ReplayLog.entryBytes))
    for seq in Int64(1)...5 { log.append(ReplayEntry(seq: seq, atMonoMs: seq, payload: Self.big(1_000))) }
    #expect(log.count == 3 && log.oldestSeq == 3)
    #expect(log.bytes == 3 * (1_000 + ReplayLog.entryBytes))
    #expect(log.events(after: 1, lastSeq: 5, now: 5) == nil)  // 2 is gone: recovered false
    #expect(log.events(after: 2, lastSeq: 5, now: 5)?.map(\.seq) == [3, 4, 5])
  }

  @Test func theBudgetDropsTheOldestEventsOfAnySession() {
    let budget = ReplayBudget(maxBytes: 4 * (1_000 + ReplayLog.entryBytes))
    let config = CoreConfig(devMode: true, serverVersion: "t")
    let old = Session(id: "old", config: config, budget: budget)
    let new = Session(id: "new", config: config, budget: budget)
    func record(_ s: Session) {
      s.seq += 1
      s.replay.record(seq: s.seq, atMonoMs: s.seq, .payload(Self.big(1_000)))
      budget.recorded(s, seq: s.seq)
    }
    for _ in 0..<3 { record(old) }
    for _ in 0..<3 { record(new) }
    #expect(budget.bytes <= budget.maxBytes)
    #expect(old.replay.oldestSeq == 3)  // its two oldest went first
    #expect(new.replay.oldestSeq == 1 && new.replay.count == 3)
    #expect(budget.evictions == 2)
    record(new)
    #expect(old.replay.oldestSeq == nil && budget.evictions == 3)
    #expect(new.replay.oldestSeq == 1 && budget.bytes == 4 * (1_000 + ReplayLog.entryBytes))
  }

  @Test func aFreedSessionGivesItsBytesBack() {
    let budget = ReplayBudget(maxBytes: 0)
    var session: Session? = Session(id: "s", config: CoreConfig(devMode: true, serverVersion: "t"), budget: budget)
    session!.replay.record(seq: 1, atMonoMs: 1, .payload(Self.big(500)))
    #expect(budget.bytes == 500 + ReplayLog.entryBytes)
    session = nil
    #expect(budget.bytes == 0)
  }

  /// End to end: 8 KB messages past `replayBytes`; a resume from before the kept
  /// events gets a fresh snapshot with `recovered: false`, and the stats show the bound.
  @Test func resumeBeyondTheByteBoundIsNotRecovered() {
    let h = Harness { c in
      shortTimings(&c)
      c.replayBytes = 40_000
      c.messageRate = 1_000
    }
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    let token = h.resumeToken(of: 2)
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    let data = String(repeating: "x", count: 8_000)
    for _ in 0..<10 { h.send(1, #"{"type":"message.send","session":"s","data":"\#(data)"}"#) }
    _ = h.out()
    #expect(h.core.stats.replayBytes <= 40_000)
    #expect(h.core.stats.replayEvictions >= 5)
    let lines = h.resume(3, uid: "b", token: token, sessions: #"{"s":2}"#)
    #expect(delivered(to: 3, lines).contains { $0.hasPrefix(#"{"type":"session.joined""#) && $0.contains(#""recovered":false"#) })
  }

  /// Every session gone: the account is back at zero.
  @Test func statsReturnToZeroWhenSessionsEnd() {
    let h = Harness()
    h.join(1, uid: "a")
    h.send(1, #"{"type":"message.send","session":"s","data":"hello"}"#)
    #expect(h.core.stats.replayBytes > 0)
    h.core.closed(ConnectionID(1), clean: true, at: h.now)
    _ = h.out()
    #expect(h.core.stats.replayBytes == 0)
  }
}
