import Testing

@testable import RelayServer

/// Kept reads are handed back fairly (RelayServer+Turns.swift): a client that sent one
/// message after a flood of others waits behind two reads, not the flood, and HTTP
/// probes and connected clients go before new upgrades.
@Suite struct ReadLanesTests {
  @Test func aLaneAlternatesOldestAndNewest() {
    var lane = ReadLane<Int>()
    for n in 0..<6 { lane.append(n) }
    var order: [Int] = []
    while !lane.isEmpty { order.append(lane.pop()) }
    #expect(order == [0, 5, 1, 4, 2, 3])
  }

  @Test func aReadArrivingBehindAFloodWaitsForAtMostTwo() {
    var lane = ReadLane<String>()
    for n in 0..<1_000 { lane.append("member \(n)") }
    _ = lane.pop()  // the handing back has begun
    lane.append("canary")
    let before = (0..<2).map { _ in lane.pop() }
    #expect(before.contains("canary"))
  }

  @Test func httpThenEstablishedThenArriving() {
    var lanes = ReadLanes<String>()
    lanes.append("upgrade 1", to: .arriving)
    lanes.append("client 1", to: .light)
    lanes.append("upgrade 2", to: .arriving)
    lanes.append("/metrics", to: .http)
    lanes.append("member 1", to: .heavy)
    var order: [String] = []
    while !lanes.isEmpty { order.append(lanes.pop().entry) }
    #expect(order == ["/metrics", "client 1", "member 1", "upgrade 1", "upgrade 2"])
  }

  /// A thousand heavy reads (1 ms each) and a light client that sends a read (20 µs)
  /// whenever its last one was handed back: the light one waits behind one heavy
  /// read at most, while the heavy lane still gets about half the time.
  @Test func aLightClientWaitsBesideAHeavyFloodNotBehindIt() {
    var lanes = ReadLanes<String>()
    for n in 0..<1_000 { lanes.append("member \(n)", to: .heavy) }
    lanes.append("canary", to: .light)
    var heavyBetween = 0
    var longestWait = 0
    var heavyServed = 0
    while heavyServed < 500 {
      let (entry, lane) = lanes.pop()
      if entry == "canary" {
        longestWait = max(longestWait, heavyBetween)
        heavyBetween = 0
        lanes.charge(lane, 20_000)
        lanes.append("canary", to: .light)
      } else {
        heavyBetween += 1
        heavyServed += 1
        lanes.charge(lane, 1_000_000)
      }
    }
    #expect(longestWait <= 1)
  }

  /// Equal shares by time, not by count: two lanes of equally heavy reads alternate,
  /// and a lane that ran alone for a while has no debt when the other fills.
  @Test func aLaneAloneBuildsNoCredit() {
    var lanes = ReadLanes<String>()
    for n in 0..<100 {
      lanes.append("light \(n)", to: .light)
      let (_, lane) = lanes.pop()
      lanes.charge(lane, 1_000_000)
    }
    lanes.append("heavy", to: .heavy)
    lanes.append("light", to: .light)
    lanes.append("light again", to: .light)
    let first = lanes.pop()
    lanes.charge(first.lane, 1_000_000)
    let second = lanes.pop()
    #expect(Set([first.entry, second.entry]) == ["heavy", "light"])
  }

  @Test func aLaneEmptiedAndRefilledStartsAfresh() {
    var lane = ReadLane<Int>()
    lane.append(1)
    #expect(lane.pop() == 1)
    #expect(lane.isEmpty)
    lane.append(2)
    lane.append(3)
    #expect(lane.pop() == 3)  // alternation carries on: the newest is next
    #expect(lane.pop() == 2)
    #expect(lane.isEmpty)
  }
}
