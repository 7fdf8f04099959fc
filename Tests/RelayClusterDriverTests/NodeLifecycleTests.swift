import RelayClusterDriver
import RelayPrimitives
import Testing

/// One rule of `NodeLifecycle` per test (docs/cluster.md, "Joining", "Bounded
/// history", "Redis high availability").
@Suite struct NodeLifecycleTests {
  static let idle = NodeLifecycle.TickerView(isTicker: false, dueMs: nil, logNowMs: 0)

  /// A machine that entered `g1`, loaded no snapshot and read up to `lastId`.
  static func reading(_ lastId: String = "0") -> NodeLifecycle {
    var m = NodeLifecycle(beatMs: 250, random: SeededRandom(seed: 1))
    _ = m.handle(.connect)
    _ = m.handle(.enter(generation: "g1", hasReplica: false))
    _ = m.handle(.snapshotLoaded(lastId: lastId))
    return m
  }

  static func nonce(_ actions: [NodeLifecycle.Action]) -> UInt64? {
    for case .join(let nonce) in actions { return nonce }
    return nil
  }

  /// A machine joined as `number` and ready.
  static func ready(_ number: UInt32 = 1) -> NodeLifecycle {
    var m = reading()
    let nonce = nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, idle)))!
    var joined = NodeLifecycle.Outcome()
    joined.joined = [.init(nonce: nonce, number: number)]
    _ = m.handle(.applied(id: "1-0", epoch: m.readEpoch, joined))
    return m
  }

  @Test func aNewGenerationLoadsItsSnapshotInAFreshEpoch() {
    var m = NodeLifecycle(beatMs: 250, random: SeededRandom(seed: 1))
    #expect(m.handle(.connect) == [.openConnections])
    let actions = m.handle(.enter(generation: "g1", hasReplica: false))
    #expect(actions.last == .loadSnapshot(generation: "g1") && m.readEpoch == 1 && m.state == .catchingUp)
    #expect(m.handle(.snapshotLoaded(lastId: "5-0")) == [.read(generation: "g1", epoch: 1, lastId: "5-0")])
  }

  @Test func itJoinsOnlyOnceCaughtUp() {
    var m = Self.reading()
    #expect(Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: NodeLifecycle.readCount, Self.idle))) == nil)
    let actions = m.handle(.readEnded(epoch: m.readEpoch, count: 3, Self.idle))
    #expect(Self.nonce(actions) != nil && m.pendingJoin == Self.nonce(actions) && m.state == .catchingUp)
    #expect(Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, Self.idle))) == nil, "one join at a time")
  }

  @Test func readyOnlyWithItsOwnJoin() {
    var m = Self.reading()
    let nonce = Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, Self.idle)))!
    var other = NodeLifecycle.Outcome()
    other.joined = [.init(nonce: nonce &+ 1, number: 1)]
    #expect(m.handle(.applied(id: "1-0", epoch: m.readEpoch, other)).isEmpty && m.state == .catchingUp)
    var mine = NodeLifecycle.Outcome()
    mine.joined = [.init(nonce: nonce, number: 2)]
    let actions = m.handle(.applied(id: "2-0", epoch: m.readEpoch, mine))
    #expect(actions.contains(.ready(reconnected: false)) && m.number == 2 && m.state == .ready && m.lastId == "2-0")
  }

  @Test func aRefusedJoinIsFatal() {
    var m = Self.reading()
    let nonce = Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, Self.idle)))!
    var refused = NodeLifecycle.Outcome()
    refused.refused = [.init(nonce: nonce, reason: "rules")]
    #expect(m.handle(.applied(id: "1-0", epoch: m.readEpoch, refused)) == [.fatal("the cluster refused this node: rules")])
  }

  @Test func repliesOfAnOlderEpochAreDropped() {
    var m = Self.ready()
    let old = m.readEpoch
    var lost = NodeLifecycle.Outcome()
    lost.lostRecords = true
    #expect(m.handle(.applied(id: "9-0", epoch: old, lost)) == [.askStoredPosition(reason: "records missing from the log")])
    #expect(m.readEpoch == old + 1 && !m.reading("g1", old))
    #expect(m.handle(.applied(id: "10-0", epoch: old, .init())).isEmpty && m.lastId == "9-0")
    #expect(m.handle(.readEnded(epoch: old, count: 0, Self.idle)).isEmpty)
  }

  @Test func declaredDeadClosesSocketsAndRejoins() {
    var m = Self.ready(3)
    var death = NodeLifecycle.Outcome()
    death.deaths = [3]
    let actions = m.handle(.applied(id: "2-0", epoch: m.readEpoch, death))
    #expect(actions.starts(with: [.declaredDead, .dropUnloggedCloses, .setLocalNode(0)]))
    #expect(actions.contains(.closeSockets(reason: "node rejoining the cluster")) && Self.nonce(actions) != nil)
    #expect(m.number == 0 && m.state == .catchingUp)
    var gone = NodeLifecycle.Outcome()
    gone.listed = false
    var other = Self.ready(3)
    #expect(other.handle(.applied(id: "2-0", epoch: other.readEpoch, gone)).first == .declaredDead)
  }

  @Test func aFailedJoinIsRetriedAtTheNextEnd() {
    var m = Self.reading()
    let nonce = Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, Self.idle)))!
    _ = m.handle(.joinFailed(nonce: nonce &+ 1))
    #expect(m.pendingJoin == nonce, "another join's failure changes nothing")
    _ = m.handle(.joinFailed(nonce: nonce))
    let again = Self.nonce(m.handle(.readEnded(epoch: m.readEpoch, count: 0, Self.idle)))
    #expect(again != nil && again != nonce)
  }

  @Test func aReconnectVerifiesHistoryThenCarriesOnReady() {
    var m = Self.ready()
    let epoch = m.readEpoch
    #expect(m.handle(.redisLost(leaving: false)).first == .busLost(wasUp: true) && m.state == .down)
    _ = m.handle(.connect)
    #expect(m.handle(.enter(generation: "g1", hasReplica: true)) == [.verifyHistory(lastId: "1-0")])
    let actions = m.handle(.historyChecked(.intact))
    #expect(actions.contains(.read(generation: "g1", epoch: epoch, lastId: "1-0")))
    #expect(actions.last == .ready(reconnected: true) && m.readEpoch == epoch)
  }

  @Test func aLostTailStartsANewGeneration() {
    var m = Self.ready()
    _ = m.handle(.redisLost(leaving: false))
    _ = m.handle(.connect)
    _ = m.handle(.enter(generation: "g1", hasReplica: true))
    #expect(m.handle(.historyChecked(.behind)) == [.replaceGeneration(old: "g1", .historyLost(lastId: "1-0"))])
    #expect(m.generation == nil)
    var trimmed = Self.ready()
    _ = trimmed.handle(.redisLost(leaving: false))
    _ = trimmed.handle(.connect)
    _ = trimmed.handle(.enter(generation: "g1", hasReplica: true))
    let rebuild = trimmed.handle(.historyChecked(.trimmed))
    #expect(rebuild == [.driver(.reconnected), .askStoredPosition(reason: "the log was trimmed past this node's last record")])
  }

  @Test func aReplicaOfAnotherGenerationIsNotCarriedOn() {
    var m = Self.ready()
    _ = m.handle(.redisLost(leaving: false))
    _ = m.handle(.connect)
    _ = m.handle(.enter(generation: "g2", hasReplica: true))  // its snapshot load is cut short
    _ = m.handle(.redisLost(leaving: false))
    _ = m.handle(.connect)
    let actions = m.handle(.enter(generation: "g2", hasReplica: true))
    #expect(actions.last == .loadSnapshot(generation: "g2"))
  }

  @Test func rebuildsWithoutProgressEndInANewGeneration() {
    var m = Self.ready()
    for round in 1...NodeLifecycle.rebuildsAllowed {
      #expect(m.handle(.storedPosition(stored: 4, mine: 4, reason: "hole")).last == .loadSnapshot(generation: "g1"))
      #expect(m.rebuildsWithoutProgress == round && m.state == .catchingUp && m.number == 0)
    }
    let last = m.handle(.storedPosition(stored: 4, mine: 4, reason: "hole"))
    #expect(last == [.replaceGeneration(old: "g1", .inconsistent(reason: "hole"))] && m.generation == nil)
    var trimmed = Self.ready()
    let actions = trimmed.handle(.storedPosition(stored: 9, mine: 4, reason: "hole"))
    #expect(actions.contains(.closeSockets(reason: "node rebuilding its state")) && actions.last == .loadSnapshot(generation: "g1"))
    #expect(trimmed.rebuildsWithoutProgress == 0)
  }

  @Test func theBeatWaitsForIdlenessAndClosesFirst() {
    var m = Self.ready()
    #expect(m.handle(.housekeep(nowMs: 1_100, lastAppendMs: 1_000, unloggedCloses: 0)).isEmpty)
    #expect(m.handle(.housekeep(nowMs: 1_125, lastAppendMs: 1_000, unloggedCloses: 0)) == [.beat])
    #expect(m.handle(.housekeep(nowMs: 9_000, lastAppendMs: 1_000, unloggedCloses: 2)) == [.retryUnloggedCloses])
    var catchingUp = Self.reading()
    #expect(catchingUp.handle(.housekeep(nowMs: 9_000, lastAppendMs: 0, unloggedCloses: 2)).isEmpty)
  }

  @Test func onlyTheReadyTickerArmsTheTimerInLogTime() {
    var m = Self.ready()
    let view = NodeLifecycle.TickerView(isTicker: true, dueMs: 5_000, logNowMs: 4_200)
    #expect(m.handle(.ticker(view)) == [.armTick(afterMs: 800)])
    #expect(m.handle(.ticker(view)).isEmpty, "armed once per deadline")
    let far = NodeLifecycle.TickerView(isTicker: true, dueMs: 10_000_000, logNowMs: 0)
    #expect(m.handle(.ticker(far)) == [.armTick(afterMs: UInt64(DeadlineTimer.longestMs))])
    #expect(m.handle(.ticker(.init(isTicker: false, dueMs: 5_000, logNowMs: 0))) == [.stopTick])
    var notReady = Self.reading()
    #expect(notReady.handle(.ticker(view)) == [.stopTick])
    #expect(m.handle(.tickDue) == [.tick] && m.armedTickMs == nil)
  }

  @Test func onlyAReadyTickerStores() {
    #expect(Self.ready().snapshotDuty(isTicker: true) == .store)
    #expect(Self.ready().snapshotDuty(isTicker: false) == .logDigest)
    #expect(Self.reading().snapshotDuty(isTicker: true) == .none)
  }

  @Test func reconnectsBackOffWithSeededJitterAndNotWhileLeaving() {
    var a = Self.ready()
    var b = Self.ready()
    let delays = (0..<6).map { _ -> [NodeLifecycle.Action] in
      _ = b.handle(.connect)
      return b.handle(.redisLost(leaving: false))
    }
    _ = a.handle(.redisLost(leaving: false))
    #expect(delays.allSatisfy { if case .reconnect(let ms)? = $0.last { ms <= 2_000 } else { false } })
    #expect(b.redisAttempts == 6)
    var leaving = Self.ready()
    #expect(leaving.handle(.redisLost(leaving: true)) == [.busLost(wasUp: true)])
    _ = b.handle(.connect)
    _ = b.handle(.enter(generation: "g1", hasReplica: true))
    #expect(b.redisAttempts == 0, "a generation entered resets the backoff")
  }
}
