// Determinism, admin entry points, stats, replay log, deadline heap, rate window.
import RelayProtocol
import Testing

@testable import RelayCore
import RelayPrimitives

@Suite struct CoreMachineryTests {
  /// A scripted run covering most paths; returns every effect rendered.
  static func script() -> [String] {
    let h = Harness()
    var lines: [String] = []
    h.join(1, uid: "host", role: "host")
    for n in UInt64(2)...6 {
      h.open(n)
      h.send(n, #"{"type":"hello","id":"h","dev":{"uid":"u\#(n)","name":"U\#(n)"}}"#)
      h.send(n, #"{"type":"session.join","id":"j","session":"s"}"#)
      h.advance(7)
      lines += h.out()
    }
    for n in UInt64(1)...6 { h.send(n, #"{"type":"hand.raise","session":"s"}"#) }
    h.send(4, #"{"type":"message.send","id":"m","session":"s","data":{"z":1,"a":[null]}}"#)
    h.send(1, #"{"type":"participant.remove","session":"s","uid":"u3"}"#)
    h.core.closed(ConnectionID(5), clean: true, at: h.now)
    h.open(9)
    h.advance(10_000)
    lines += h.out()
    _ = h.core.createSession(at: h.now)
    lines.append(String(decoding: h.core.sessionInfo("s")!, as: UTF8.self))
    return lines
  }

  @Test func sameInputsGiveByteIdenticalEffects() {
    let first = Self.script()
    let second = Self.script()
    #expect(first == second)
    #expect(first.count > 20)
  }

  @Test func adminCreateInfoAndRemove() {
    let h = Harness()
    let id = h.core.createSession(at: h.now)
    #expect(id == "id1")
    #expect(h.core.sessionInfo(id).map { String(decoding: $0, as: UTF8.self) }
      == #"{"sessionId":"id1","seq":0,"participants":[],"hands":[]}"#)
    #expect(h.core.sessionInfo("missing") == nil)
    h.join(1, uid: "a", session: id)
    h.join(2, uid: "b", session: id)
    h.send(1, #"{"type":"hand.raise","session":"id1"}"#)
    _ = h.out()
    #expect(h.core.removeParticipant(session: id, uid: "nobody", at: h.now) == false)
    #expect(h.core.removeParticipant(session: "missing", uid: "a", at: h.now) == false)
    #expect(h.core.removeParticipant(session: id, uid: "a", at: h.now))
    #expect(h.out() == [
      #"c1 <- {"type":"session.left","session":"id1","reason":"removed"}"#,
      #"c2 <- {"type":"hand.lowered","session":"id1","seq":4,"ts":\#(h.ts),"uid":"a","by":null,"reason":"removed"}"#,
      #"c2 <- {"type":"participant.left","session":"id1","seq":5,"ts":\#(h.ts),"uid":"a","reason":"removed"}"#,
    ])
  }

  @Test func statsCountWhatHappened() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(1, #"{"type":"message.send","session":"s","data":1}"#)
    h.send(1, "nope")
    h.open(3)
    let stats = h.core.stats
    #expect(stats.connections == 3)
    #expect(stats.sessions == 1)
    #expect(stats.participants == 2)
    #expect(stats.commandsByType["session.join"] == 2)
    #expect(stats.commandsByType["message.send"] == 1)
    #expect(stats.eventsByType["message"] == 1)
    #expect(stats.eventsByType["participant.joined"] == 2)
    #expect(stats.deliveries == 1 + 2)  // participant.joined to a, message to a and b
    #expect(stats.errorsByCode["bad_request"] == 1)
  }

  @Test func sessionEventsAreRecordedForReplay() throws {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(1, #"{"type":"hand.raise","session":"s"}"#)
    let session = try #require(h.core.sessions["s"])
    let events = session.replay.events(after: 0, lastSeq: session.seq, now: h.now.monoMs)
    let all = try #require(events)
    #expect(all.map(\.seq) == [1, 2, 3])
    #expect(typeOf(String(decoding: all[0].payload.bytes, as: UTF8.self)) == "participant.joined")
    let none = session.replay.events(after: 3, lastSeq: 3, now: h.now.monoMs)
    #expect(none?.isEmpty == true)
    let future = session.replay.events(after: 4, lastSeq: 3, now: h.now.monoMs)
    #expect(future == nil)
  }

  @Test func replayLogIsBoundedByCountAndAge() {
    var log = ReplayLog(maxEvents: 3, maxAgeMs: 100)
    let p = Payload([])
    for seq in Int64(1)...5 { log.append(ReplayEntry(seq: seq, atMonoMs: seq * 10, payload: p)) }
    #expect(log.oldestSeq == 3)
    let gone = log.events(after: 1, lastSeq: 5, now: 50)  // 2 is gone
    #expect(gone == nil)
    let kept = log.events(after: 2, lastSeq: 5, now: 50)
    #expect(kept?.map(\.seq) == [3, 4, 5])
    let aged = log.events(after: 3, lastSeq: 5, now: 135)  // 4 is 95 ms old: kept
    #expect(aged?.map(\.seq) == [4, 5])
    let older = log.events(after: 3, lastSeq: 5, now: 145)  // 4 is 105 ms old: gone
    #expect(older == nil)
    var big = ReplayLog(maxEvents: 1_000, maxAgeMs: 1_000_000)
    for seq in Int64(1)...5_000 { big.append(ReplayEntry(seq: seq, atMonoMs: seq, payload: p)) }
    #expect(big.count == 1_000)
    let tail = big.events(after: 4_990, lastSeq: 5_000, now: 5_000)
    #expect(tail?.map(\.seq) == Array(4_991...5_000))
  }

  @Test func deadlineHeapOrdersByTimeThenInsertion() {
    var queue = DeadlineQueue()
    let times: [Int64] = [50, 10, 40, 10, 30, 20, 60, 0]
    for (i, t) in times.enumerated() { queue.schedule(at: t, .hello(ConnectionID(UInt64(i)))) }
    #expect(queue.popDue(-1) == nil)
    var fired: [UInt64] = []
    while let d = queue.popDue(45) {
      if case .hello(let c) = d.kind { fired.append(c.raw) }
    }
    #expect(fired == [7, 1, 3, 5, 4, 2])
    #expect(queue.count == 2)
    #expect(queue.first?.atMonoMs == 50)
  }

  @Test func nextDeadlineSkipsMootEntries() {
    let h = Harness(configure: withoutHeartbeats)
    h.open(1)
    h.advance(100)
    h.open(2)
    h.send(1, #"{"type":"hello","dev":{"uid":"a","name":"A"}}"#)
    #expect(h.core.nextDeadline == h.now.monoMs + 10_000)  // c1's is moot, c2's remains
  }

  @Test func rateWindowBoundary() {
    var window = RateWindow()
    #expect([0, 50].map { window.tryAcquire(at: $0, limit: 2, windowMs: 100) } == [true, true])
    let results = [99, 100, 149, 150].map { window.tryAcquire(at: $0, limit: 2, windowMs: 100) }
    #expect(results == [false, true, false, true])
  }

  @Test("the window matches a model of its last accepted instants, for limits 1 to 4")
  func rateWindowMatchesModel() {
    for limit in 1...4 {
      var window = RateWindow()
      var accepted: [Int64] = []
      var random = SeededRandom(seed: UInt64(limit))
      var now: Int64 = 0
      for _ in 0..<2_000 {
        now += Int64.random(in: 0...40, using: &random)
        let model = accepted.count < limit || now - accepted[accepted.count - limit] >= 100
        #expect(window.tryAcquire(at: now, limit: limit, windowMs: 100) == model)
        if model { accepted.append(now) }
      }
    }
  }
}
