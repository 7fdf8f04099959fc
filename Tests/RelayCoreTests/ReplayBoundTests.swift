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

  /// The eviction order a snapshot captures keeps its records while the budget goes
  /// on recording past several chunks, evicting and compacting; and the order's live
  /// records are always exactly the kept events, oldest first (what a snapshot writes).
  @Test func aCapturedEvictionOrderStaysAsCapturedWhileTheBudgetGoesOn() {
    let budget = ReplayBudget(maxBytes: 200 * (100 + ReplayLog.entryBytes))
    var config = CoreConfig(devMode: true, serverVersion: "t")
    config.replayEvents = 25  // these logs drop by their own bound: stale records pile up
    var sessions = (0..<4).map { Session(id: "s\($0)", config: config, budget: budget) }
    config.replayEvents = 10_000  // this one, recorded into later, outgrows the budget
    sessions.append(Session(id: "big", config: config, budget: budget))
    func records(_ order: ReplayBudget.Order) -> [String] {
      var all: [String] = []
      order.forEach { all.append("\($0.log):\($0.seq)") }
      return all
    }
    var captures: [(order: ReplayBudget.Order, records: [String])] = []
    for step in 0..<5_000 {
      let s = step >= 2_500 && step % 2 == 0 ? sessions[4] : sessions[(step * 7 + step / 3) % 4]
      s.seq += 1
      s.replay.record(seq: s.seq, atMonoMs: s.seq, .payload(Self.big(100)))
      budget.recorded(s, seq: s.seq)
      if step % 97 == 0 { captures.append((budget.capturedOrder, records(budget.capturedOrder))) }
      let kept = sessions.reduce(0) { $0 + $1.replay.count }
      #expect(budget.capturedOrder.count <= max(1_024, 2 * kept) + 1, "step \(step): order not compacted")
      guard step % 50 == 0 else { continue }
      var logs: [UInt64: (index: UInt32, oldestSeq: Int64)] = [:]
      var expected: [UInt32] = []
      for (i, s) in sessions.enumerated() {
        guard let oldest = s.replay.oldestSeq else { continue }
        logs[s.replay.serial] = (UInt32(i), oldest)
        expected += (oldest...s.seq).map { _ in UInt32(i) }
      }
      let live = ReplayBudget.liveRecords(budget.capturedOrder, logs: logs)
      #expect(live.count == kept && live.sorted() == expected, "step \(step): live records")
    }
    #expect(budget.evictions > 0 && sessions[0].replay.count == 25)
    for c in captures { #expect(records(c.order) == c.records) }
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
