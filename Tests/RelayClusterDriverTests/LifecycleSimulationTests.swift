import RelayClusterDriver
import RelayPrimitives
import Testing

/// The node's lifecycle machine driven against a model of the shared log with faults
/// (LifecycleSim.swift, LifecycleSimulation.swift). A failure names its seed, to be
/// replayed with `LifecycleSimulation(seed:).run(steps:)`.
@Suite struct LifecycleSimulationTests {
  static let seeds = UInt64(1)...40
  static let steps = 500

  @Test func seededRunsKeepTheInvariants() {
    for seed in Self.seeds {
      var sim = LifecycleSimulation(seed: seed)
      if let failure = sim.run(steps: Self.steps) {
        Issue.record("seed \(seed): \(failure)")
      }
    }
  }

  @Test func runsAreDeterministic() {
    var a = LifecycleSimulation(seed: 7)
    var b = LifecycleSimulation(seed: 7)
    _ = a.run(steps: Self.steps)
    _ = b.run(steps: Self.steps)
    #expect(a.world.log == b.world.log && a.nodes.map(\.machine.lastId) == b.nodes.map(\.machine.lastId))
  }

  /// The seeds meet every fault: a run that never dropped a stale reply or never
  /// rebuilt would prove nothing.
  @Test func theSeedsMeetTheFaults() {
    var seen = LifecycleSimulation.Seen()
    for seed in Self.seeds {
      var sim = LifecycleSimulation(seed: seed)
      _ = sim.run(steps: Self.steps)
      seen.add(sim.seen)
    }
    #expect(seen.readies > 100 && seen.reconnectedReadies > 20 && seen.staleDropped > 5, "\(seen)")
    #expect(seen.rebuilds > 5 && seen.replacements > 5 && seen.deaths > 10 && seen.failovers > 10, "\(seen)")
    #expect(seen.stores > 20 && seen.digests > 20 && seen.lostJoins > 10 && seen.holes > 5, "\(seen)")
    #expect(seen.divergences > 10 && seen.abandonedUploads > 5 && seen.failedUploads > 5, "\(seen)")
  }

  /// The checks can fail: an adapter that applies replies of an older epoch is caught
  /// applying a record twice or skipping one.
  @Test func theCheckCatchesStaleReplies() {
    #expect(Self.caught { $0.ignoreEpochs = true } > 0)
  }

  /// An adapter that uploads on after its node left the generation or its readiness
  /// is caught swapping a snapshot in.
  @Test func theCheckCatchesAnUploadThatOutlivesItsNode() {
    #expect(Self.caught { $0.uploadRegardless = true } > 0)
  }

  /// The seeds whose run fails with a rule switched off by `breaking`.
  private static func caught(_ breaking: (inout LifecycleSimulation) -> Void) -> Int {
    seeds.filter { seed in
      var sim = LifecycleSimulation(seed: seed)
      breaking(&sim)
      return sim.run(steps: steps) != nil
    }.count
  }
}
