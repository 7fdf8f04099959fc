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
    lanes.append("client 1", to: .established)
    lanes.append("upgrade 2", to: .arriving)
    lanes.append("/metrics", to: .http)
    lanes.append("client 2", to: .established)
    var order: [String] = []
    while !lanes.isEmpty { order.append(lanes.pop()) }
    #expect(order == ["/metrics", "client 1", "client 2", "upgrade 1", "upgrade 2"])
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
