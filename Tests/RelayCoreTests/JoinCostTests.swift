// §6 join/leave rate per connection, and the snapshot encoded once per session state.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct JoinRateTests {
  static func join(_ h: Harness, id: String) {
    h.send(1, #"{"type":"session.join","id":"\#(id)","session":"s"}"#)
  }

  @Test func joinsAndLeavesShareOneSlidingWindow() {
    let h = Harness { c in
      c.joinRate = 4
      withoutHeartbeats(&c)
    }
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"session.join","session":"s"}"#)
    h.send(1, #"{"type":"session.leave","session":"s"}"#)
    h.send(1, #"{"type":"session.join","session":"s"}"#)
    h.advance(5_000)
    h.send(1, #"{"type":"session.join","session":"s"}"#)  // idempotent re-join counts too
    #expect(!h.out().contains { $0.contains("rate_limited") })
    Self.join(h, id: "5")
    #expect(h.out() == [#"c1 <- {"type":"error","re":"5","code":"rate_limited","message":"at most 4 joins and leaves per 10000 ms"}"#])
    h.send(1, #"{"type":"session.leave","id":"6","session":"s"}"#)
    #expect(h.out().first?.contains(#""re":"6","code":"rate_limited""#) == true)
    #expect(h.statuses() == ["a:connected"])  // the refused leave changed nothing
    // 10 000 ms after the first join the window has slid past it.
    h.advance(5_000)
    Self.join(h, id: "7")
    #expect(h.out().contains { $0.contains(#""type":"ok","re":"7""#) })
  }

  @Test func windowsArePerConnection() {
    let h = Harness { $0.joinRate = 1 }
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    Self.join(h, id: "again")
    #expect(h.out().first?.contains("rate_limited") == true)
    h.core.closed(ConnectionID(1), clean: true, at: h.now)
    #expect(h.core.connections[ConnectionID(1)] == nil)  // its window went with it
  }

  @Test func defaultLetsAClientJoinItsSixteenSessionsAtOnce() {
    let h = Harness()
    h.connect(1, uid: "a")
    for i in 0..<16 { h.send(1, #"{"type":"session.join","session":"s\#(i)"}"#) }
    #expect(!h.out().contains { $0.contains("error") })
  }
}

@Suite struct SharedSnapshotTests {
  static func snapshot(_ lines: [String], to n: UInt64) -> String? {
    delivered(to: n, lines).first { typeOf($0) == "session.joined" }
  }

  /// Repeated snapshots of one state are the same bytes, and every change in between
  /// (a hand, a takeover with a new name, a member lost) shows in the next one.
  @Test func snapshotFollowsEveryChange() {
    let h = Harness { c in c.joinRate = 100 }
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    var previous = ""
    for _ in 0..<3 {
      h.send(1, #"{"type":"session.join","session":"s"}"#)
      let now = Self.snapshot(h.out(), to: 1) ?? ""
      #expect(previous.isEmpty || now == previous)
      previous = now
    }
    h.send(2, #"{"type":"hand.raise","session":"s"}"#)
    _ = h.out()
    h.send(1, #"{"type":"session.join","session":"s"}"#)
    let withHand = Self.snapshot(h.out(), to: 1) ?? ""
    #expect(withHand.contains(#""hands":[{"uid":"b""#))
    // b takes over from a new connection under a new name: no event, new snapshot.
    h.open(3)
    h.send(3, #"{"type":"hello","dev":{"uid":"b","name":"Bee"}}"#)
    h.send(3, #"{"type":"session.join","session":"s"}"#)
    _ = h.out()
    h.send(1, #"{"type":"session.join","session":"s"}"#)
    let renamed = Self.snapshot(h.out(), to: 1) ?? ""
    #expect(renamed.contains(#""name":"Bee""#))
    h.core.closed(ConnectionID(3), clean: false, at: h.now)
    _ = h.out()
    h.send(1, #"{"type":"session.join","session":"s"}"#)
    #expect(Self.snapshot(h.out(), to: 1)?.contains(#""status":"lost""#) == true)
  }
}
