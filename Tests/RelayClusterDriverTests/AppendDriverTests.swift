import RelayClusterDriver
import Testing

/// The append machine's answers, one case at a time (AppendDriver.swift); the
/// simulation (AppendSimulationTests.swift) drives it against faults at random.
@Suite struct AppendDriverTests {
  private func driver(minReplicas: Int = 0) -> AppendDriver {
    AppendDriver(policy: ReplicaPolicy(minReplicas: minReplicas, followsFailovers: false))
  }

  /// The bug this machine fixes: Redis dies after the node read its own record back
  /// but before the append's reply: the command got its answer from the record, and
  /// must not get a late `unavailable` too.
  @Test func aRecordReadBackIsNeverAnsweredAgain() {
    var d = driver()
    _ = d.handle(.append(1, record: [1]))
    #expect(d.handle(.applied(record: [1])) == [.settled(1)])
    let lost = d.handle(.scriptReply(1, .lost))
    #expect(!lost.contains(.fail(1)) && d.inFlight == 0)
    _ = d.handle(.reconnected)
    #expect(d.handle(.caughtUp).isEmpty)
  }

  /// Records are matched by their bytes, not by their storage or their length: a
  /// read-back copy finds its batch, oldest first among equal bytes, and a record of
  /// the same length with other bytes finds none.
  @Test func aRecordIsMatchedByItsBytes() {
    var d = driver()
    let record = (0..<4_096).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    var other = record
    other[2_000] ^= 1
    _ = d.handle(.append(1, record: record))
    _ = d.handle(.append(2, record: record))
    #expect(d.handle(.applied(record: other)).isEmpty)
    #expect(d.handle(.applied(record: Array(record[...]))) == [.settled(1)])
    #expect(d.handle(.applied(record: record.map { $0 })) == [.settled(2)])
    #expect(d.handle(.applied(record: record)).isEmpty)
  }

  /// A lost reply is decided by the re-read after the reconnect: found, applying it
  /// answered it; not found, `unavailable` — and not before.
  @Test func aLostReplyWaitsForTheReread() {
    var d = driver()
    _ = d.handle(.append(1, record: [1]))
    _ = d.handle(.append(2, record: [2]))
    _ = d.handle(.scriptReply(1, .lost))
    _ = d.handle(.scriptReply(2, .lost))
    #expect(d.handle(.caughtUp).isEmpty)  // a read of the old connection decides nothing
    _ = d.handle(.reconnected)
    #expect(d.handle(.applied(record: [2])) == [.settled(2)])
    #expect(d.handle(.caughtUp) == [.fail(1)])
    #expect(d.inFlight == 0)
  }

  /// Redis does not come back: a batch without a reply is answered `unavailable` once
  /// it has been undecided for the limit, never before, and only once.
  @Test func anUndecidedBatchIsAnsweredAfterTheLimit() {
    var d = driver()
    _ = d.handle(.append(1, record: [1]))
    _ = d.handle(.append(2, record: [2]))
    _ = d.handle(.scriptReply(1, .lost))
    #expect(d.handle(.expire(nowMs: 5_000)).isEmpty)  // first seen undecided
    let limit = AppendDriver.undecidedLimitMs
    #expect(d.handle(.expire(nowMs: 5_000 + limit - 1)).isEmpty)
    #expect(d.handle(.expire(nowMs: 5_000 + limit)) == [.fail(1)])
    #expect(d.handle(.expire(nowMs: 5_000 + 3 * limit)).isEmpty)  // 2 still awaits its reply
    #expect(d.handle(.applied(record: [1])).isEmpty)  // read back later: not answered again
    #expect(d.inFlight == 1)
  }

  /// A read that reached the log's end before a batch was stored says nothing about it.
  @Test func aStoredBatchIsNotFailedByAnEarlierRead() {
    var d = driver()
    _ = d.handle(.append(1, record: [1]))
    _ = d.handle(.scriptReply(1, .stored))
    #expect(d.handle(.caughtUp).isEmpty)
    #expect(d.handle(.applied(record: [1])) == [.settled(1)])
  }

  /// Equal records (two beats) are matched oldest first; a new generation fails what
  /// was never read back.
  @Test func equalRecordsAndANewGeneration() {
    var d = driver()
    _ = d.handle(.append(1, record: [9]))
    _ = d.handle(.append(2, record: [9]))
    #expect(d.handle(.applied(record: [9])) == [.settled(1)])
    #expect(d.handle(.historyEnded) == [.fail(2)])
  }

  /// With replicas required: a stored append waits for `WAIT`; short of N it marks
  /// the node failing and leaves the batch to the reader (which applies a record only
  /// once the replicas hold it): applied, it is settled, never failed first; N clears
  /// the mark.
  @Test func waitsForTheReplicas() {
    var d = driver(minReplicas: 1)
    _ = d.handle(.append(1, record: [1]))
    #expect(d.handle(.scriptReply(1, .stored)) == [.sendWait(1, replicas: 1)])
    let short = d.handle(.waitReply(1, .count(0)))
    #expect(!short.contains(.fail(1)) && d.failing)
    _ = d.handle(.append(2, record: [2]))
    _ = d.handle(.scriptReply(2, .stored))
    #expect(d.handle(.waitReply(2, .count(1))).isEmpty && !d.failing)
    #expect(d.handle(.applied(record: [1])) == [.settled(1)])
  }

  /// A short `WAIT` whose record the reader never applies (the replicas stay away,
  /// or the primary died with it) is answered `unavailable` after the limit.
  @Test func aShortWaitNeverReadBackFailsAfterTheLimit() {
    var d = driver(minReplicas: 1)
    _ = d.handle(.append(1, record: [1]))
    _ = d.handle(.scriptReply(1, .stored))
    _ = d.handle(.waitReply(1, .count(0)))
    #expect(d.handle(.expire(nowMs: 1_000)).isEmpty)
    #expect(d.handle(.expire(nowMs: 1_000 + AppendDriver.undecidedLimitMs - 1)).isEmpty)
    #expect(d.handle(.expire(nowMs: 1_000 + AppendDriver.undecidedLimitMs)) == [.fail(1)])
  }

  /// `NOSCRIPT`: sent again whole and loaded again; `EVALSHA` once loaded.
  @Test func noScriptResendsTheBody() {
    var d = driver()
    #expect(d.handle(.append(1, record: [1])) == [.sendAppend(1, record: [1], bySHA: false)])
    _ = d.handle(.scriptLoaded)
    #expect(d.handle(.append(2, record: [2])) == [.sendAppend(2, record: [2], bySHA: true)])
    #expect(d.handle(.scriptReply(2, .noScript)) == [.sendAppend(2, record: [2], bySHA: false), .loadScripts])
    #expect(d.handle(.scriptReply(2, .reset("RESET generation changed"))) == [.fail(2), .generationLost("RESET generation changed")])
  }

  /// Backpressure marks: paused at the high mark, resumed once under both low marks.
  @Test func backpressureMarks() {
    var d = AppendDriver(
      policy: ReplicaPolicy(minReplicas: 0, followsFailovers: false),
      pipeline: AppendPipeline(highRecords: 3, lowRecords: 1, highBytes: 1 << 20, lowBytes: 1 << 19))
    _ = d.handle(.append(1, record: [1]))
    _ = d.handle(.append(2, record: [2]))
    #expect(d.handle(.append(3, record: [3])).contains(.pauseReading))
    #expect(d.handle(.scriptReply(1, .stored)).isEmpty)
    #expect(d.handle(.scriptReply(2, .stored)) == [.resumeReading])
  }
}
