// Snapshots of the core (SnapshotEncode.swift, docs/cluster.md "Limits"): a restored
// core is the same state machine as the one it was taken from, and the restore
// refuses anything else without trapping.
//
//   RELAY_SNAPSHOT_SEEDS=N   seeds of the cluster-mode equivalence run (default 300)
//   RELAY_SNAPSHOT_SEED=S    run only seed S
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif
import RelayProtocol
import Testing

@testable import RelayCore
import RelayPrimitives

@Suite struct SnapshotEquivalenceTests {
  static func seeds(default count: UInt64) -> [UInt64] {
    if let one = LivenessSimulationTests.environment("RELAY_SNAPSHOT_SEED") { return [one] }
    return Array(1...(LivenessSimulationTests.environment("RELAY_SNAPSHOT_SEEDS") ?? count))
  }

  /// Runs the seeds; returns the events of each type the twins emitted after their
  /// restore, summed.
  static func runTwins(_ seeds: [UInt64]) -> [String: UInt64] {
    var after: [String: UInt64] = [:]
    var failed = 0
    for seed in seeds {
      let sim = TwinSim(seed: seed)
      var pick = SeededRandom(seed: seed ^ 0xABCD)
      sim.run(steps: 300, restoreAt: 10 + pick.below(150))
      if sim.twin == nil { sim.fail("never restored") }
      if sim.compared == 0 { sim.fail("no effect compared") }
      for (type, n) in sim.twin?.stats.eventsByType ?? [:] { after[type, default: 0] += n - sim.eventsAtRestore[type, default: 0] }
      after["restores", default: 0] += UInt64(sim.restores)
      after["heartbeat drops", default: 0] += UInt64(sim.heartbeatDrops)
      after["timedOut", default: 0] += sim.twin?.stats.timedOut ?? 0
      for (outcome, n) in sim.twin?.callStats.outcomes ?? [:] { after["call outcome \(outcome)", default: 0] += n }
      guard !sim.failures.isEmpty else { continue }
      failed += 1
      let lines = sim.failures.joined(separator: "\n")
      Issue.record("RELAY_SNAPSHOT_SEED=\(seed):\n\(lines)")
      if failed >= 3 { break }
    }
    return after
  }

  /// Restored at a random point, the twin
  /// produces exactly the primary's effects for every further input, and the same
  /// snapshot at the end; the schedules reach grace expiry, idle countdowns, ring
  /// timeouts, resumes, hands and finished calls after the restore.
  @Test func restoredCoreBehavesIdenticallyInClusterMode() {
    let after = Self.runTwins(Self.seeds(default: 300))
    print("snapshot twins (cluster mode), events after restore:", after.sorted { $0.key < $1.key })
    guard LivenessSimulationTests.environment("RELAY_SNAPSHOT_SEED") == nil else { return }
    for type in [
      "participant.timed_out", "session.idle_warning", "session.timed_out", "participant.restored",
      "session.resumed", "hand.raised", "hand.lowered", "hands.cleared", "message", "call.unanswered",
      "call.accepted", "call.ended", "call.incoming", "participant.lost",
    ] {
      #expect(after[type, default: 0] > 0, "no \(type) after a restore")
    }
    #expect(after["call outcome unanswered", default: 0] > 0)
  }

  /// §5 heartbeats are the shell's and never in a snapshot: silent sockets the shell
  /// drops after a restore reach both cores as the same unclean close, with the same
  /// effects (lost, then grace).
  @Test func heartbeatDropsAfterARestoreAgree() {
    let after = Self.runTwins(Array(1...60))
    #expect(after["heartbeat drops", default: 0] > 0)
    #expect(after["participant.lost", default: 0] > 0)
  }

  /// Along the liveness simulation (the shell's heartbeats, resumes, half-open
  /// sockets), every step's state restores and snapshots to the same bytes.
  @Test func everyStateOfTheLivenessSimulationRoundTrips() throws {
    for seed in 1...40 as ClosedRange<UInt64> {
      let world = SimWorld(seed: seed)
      while world.step < 150 && world.failures.isEmpty {
        world.randomAction()
        let bytes = world.core.snapshot()
        let restored = try RelayCore(
          restoring: bytes, config: world.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
        #expect(restored.snapshot() == bytes, "seed \(seed) step \(world.step)")
      }
      #expect(world.failures.isEmpty)
    }
  }

  /// The snapshot does not depend on how the state was reached in memory: deadlines
  /// made moot, and queue entries already discarded by `nextDeadline`, leave no trace.
  @Test func mootDeadlinesLeaveNoTrace() throws {
    let h = Harness()
    h.join(1, uid: "a", session: "s")
    h.open(2)
    h.core.closed(ConnectionID(2), clean: true, at: h.now)  // its hello timeout is moot
    // Queued: both hello timeouts (moot) and the idle countdown's two (wanted).
    #expect(h.core.debugDeadlineCount == 4)
    let before = h.core.snapshot()
    _ = h.core.nextDeadline  // discards the moot entry at the front
    #expect(h.core.debugDeadlineCount == 2)
    #expect(h.core.snapshot() == before)
    let restored = try RelayCore(restoring: before, config: h.core.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
    #expect(restored.debugDeadlineCount == 2)
    #expect(restored.snapshot() == before)
  }
}

@Suite struct SnapshotSizeTests {
  /// 10 000 participants in 10 sessions of 1 000, each on its own connection, in the
  /// cluster configuration; prints the snapshot's size and its encode and restore
  /// times (a restore decodes, then encodes once more to check the bytes are
  /// canonical). Debug build figures; no timing assertion.
  @Test func tenThousandParticipants() throws {
    let config = CoreConfig(devMode: true, serverVersion: "size")
    let ids = SeededIDs(prefix: "z", long: true)
    let core = RelayCore(config: config, ids: ids, verifyToken: { _, _ in nil })
    var now = Instant(monoMs: 1_000, wallMs: 1_700_000_000_000)
    for n in 0..<10_000 {
      let c = ConnectionID(1 << 40 | UInt64(n + 1))
      core.open(c, at: now)
      core.receive(c, text: Array(#"{"type":"hello","dev":{"uid":"user-\#(n)","name":"User \#(n)"}}"#.utf8), at: now)
      guard let connection = core.connections[c] else { return #expect(Bool(false)) }
      // `join` minus the `session.joined` reply, which would re-encode the growing
      // member list 10 000 times: the state is the same.
      let id = "session-\(n % 10)"
      let session = core.sessions[id] ?? Session(id: id, config: config, budget: core.replayBudget)
      core.addParticipant(to: session, Request(connection: connection, id: nil, at: now))
      _ = core.takeEffects()
      now.monoMs += 1
      now.wallMs += 1
    }
    #expect(core.stats.participants == 10_000)
    let clock = ContinuousClock()
    var bytes: [UInt8] = []
    let encode = clock.measure { bytes = core.snapshot() }
    var restored: RelayCore?
    let decode = try clock.measure {
      restored = try RelayCore(restoring: bytes, config: config, ids: ids, verifyToken: { _, _ in nil })
    }
    #expect(restored?.stats == core.stats)
    print("snapshot of 10 000 participants in 10 sessions: \(bytes.count) bytes, encode \(encode), restore \(decode)")
  }
}
