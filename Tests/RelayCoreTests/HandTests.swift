// §7 raise hand: queue, idempotence, permissions, sliding-window rate limit.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct HandTests {
  @Test func raiseIsSentToEveryMemberAfterTheOk() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(2, #"{"type":"hand.raise","id":"r","session":"s"}"#)
    #expect(h.out() == [
      #"c2 <- {"type":"ok","re":"r"}"#,
      #"c1,c2 <- {"type":"hand.raised","session":"s","seq":3,"ts":\#(h.ts),"uid":"b","name":"B","raisedAt":\#(h.ts)}"#,
    ])
  }

  @Test func raisingTwiceChangesNothing() {
    let h = Harness()
    h.join(1, uid: "a")
    h.send(1, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(1, #"{"type":"hand.raise","id":"again","session":"s"}"#)
    #expect(h.out() == [#"c1 <- {"type":"ok","re":"again"}"#])
  }

  @Test func reRaiseGoesToTheBackAndSnapshotKeepsQueueOrder() throws {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(1, #"{"type":"hand.raise","session":"s"}"#)
    h.advance(10)
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    h.advance(10)
    h.send(1, #"{"type":"hand.lower","session":"s"}"#)
    h.advance(10)
    h.send(1, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.join(3, uid: "c")  // late joiner's snapshot
    let info = try JSONParser.parse(h.core.sessionInfo("s")!)
    let hands = info["hands"]!.arrayValue!
    #expect(hands.map { $0["uid"]!.stringValue! } == ["b", "a"])
    #expect(hands.map { $0["raisedAt"]!.numberValue!.int64! } == [h.ts - 20, h.ts])
  }

  @Test func raisedAtNeverDecreasesAlongTheQueue() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.send(1, #"{"type":"hand.raise","session":"s"}"#)
    let first = h.ts
    h.now.wallMs -= 5_000  // wall clock steps back (NTP); monotonic time does not
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    let lines = h.out()
    #expect(lines.last!.hasSuffix(#""uid":"b","name":"B","raisedAt":\#(first)}"#))
  }

  @Test func lowerRulesAndReasons() {
    let h = Harness()
    h.join(1, uid: "host", role: "host")
    h.join(2, uid: "p")
    h.join(3, uid: "q")
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    h.send(3, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(3, #"{"type":"hand.lower","id":"1","session":"s","uid":"p"}"#)
    h.send(2, #"{"type":"hand.lower","id":"2","session":"s"}"#)
    h.send(1, #"{"type":"hand.lower","id":"3","session":"s","uid":"q"}"#)
    h.send(1, #"{"type":"hand.lower","id":"4","session":"s","uid":"q"}"#)
    #expect(h.out() == [
      #"c3 <- {"type":"error","re":"1","code":"forbidden","message":"host role required"}"#,
      #"c2 <- {"type":"ok","re":"2"}"#,
      #"c1,c2,c3 <- {"type":"hand.lowered","session":"s","seq":6,"ts":\#(h.ts),"uid":"p","by":"p","reason":"self"}"#,
      #"c1 <- {"type":"ok","re":"3"}"#,
      #"c1,c2,c3 <- {"type":"hand.lowered","session":"s","seq":7,"ts":\#(h.ts),"uid":"q","by":"host","reason":"host"}"#,
      #"c1 <- {"type":"ok","re":"4"}"#,
    ])
  }

  @Test func lowerAllIsHostOnlyAndSilentWhenNoHandIsUp() {
    let h = Harness()
    h.join(1, uid: "host", role: "host")
    h.join(2, uid: "p")
    h.send(2, #"{"type":"hand.lower_all","id":"1","session":"s"}"#)
    h.send(1, #"{"type":"hand.lower_all","id":"2","session":"s"}"#)
    #expect(h.out() == [
      #"c2 <- {"type":"error","re":"1","code":"forbidden","message":"host role required"}"#,
      #"c1 <- {"type":"ok","re":"2"}"#,
    ])
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(1, #"{"type":"hand.lower_all","session":"s"}"#)
    #expect(h.out() == [#"c1,c2 <- {"type":"hands.cleared","session":"s","seq":4,"ts":\#(h.ts),"by":"host"}"#])
    #expect(h.core.sessionInfo("s").map { String(decoding: $0, as: UTF8.self) }?.hasSuffix(#""hands":[]}"#) == true)
  }

  @Test func slidingWindowOfTenPerTenSeconds() {
    let h = Harness()
    h.join(1, uid: "a")
    // 10 commands spread over 9 seconds: all accepted.
    for i in 0..<10 {
      h.send(1, i % 2 == 0 ? #"{"type":"hand.raise","session":"s"}"# : #"{"type":"hand.lower","session":"s"}"#)
      if i < 9 { h.advance(1_000) }
    }
    #expect(!h.out().contains { $0.contains("rate_limited") })
    // The 11th within 10 000 ms of the first: refused, nothing changes.
    h.send(1, #"{"type":"hand.raise","id":"11","session":"s"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"11","code":"rate_limited","message":"at most 10 raise/lower per 10000 ms"}"#])
    // 10 000 ms after the first, the window has slid past it.
    h.advance(999)
    h.send(1, #"{"type":"hand.raise","id":"x","session":"s"}"#)
    #expect(h.out().first?.contains("rate_limited") == true)
    h.advance(1)
    h.send(1, #"{"type":"hand.raise","id":"12","session":"s"}"#)
    let lines = h.out().filter { !$0.hasPrefix("ping") }  // §5 heartbeats run meanwhile
    #expect(lines.first == #"c1 <- {"type":"ok","re":"12"}"#)
    #expect(lines.count == 2)  // hand was down after 10 alternating commands: raised now
  }
}
