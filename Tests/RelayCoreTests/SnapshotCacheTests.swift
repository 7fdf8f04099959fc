// The capture caches (SnapshotCache.swift): a snapshot that reuses what the last one
// captured has exactly the bytes of one built afresh, whatever happened in between,
// and rebuilds only what changed.
//
//   RELAY_CAPTURE_SEEDS=N   seeds of the cached-versus-fresh run (default 60)
import RelayPrimitives
import Testing

@testable import RelayCore

@Suite struct SnapshotCacheTests {
  /// Cached and fresh captures of `core` give the same bytes; an unchanged core's
  /// second cached capture too.
  static func check(_ core: RelayCore, _ sim: TwinSim, _ label: String) {
    let fresh = core.snapshotParts(reusing: false).joined()
    let cached = core.snapshotParts().joined()
    if cached != fresh { sim.fail("\(label): cached capture differs from a fresh one") }
    if core.snapshotParts().joined() != fresh { sim.fail("\(label): second cached capture differs") }
  }

  /// Random inputs of every kind (SnapshotSim: hellos, resumes, joins, leaves,
  /// takeovers, hands, messages, rate limits, calls, pushes, lost and clean closes,
  /// grace and idle ends, admin and HTTP actions), captures at random points, on the
  /// primary and on twins restored from snapshots (whose caches start from nothing).
  @Test func cachedCaptureEqualsFreshCapture() {
    let count = LivenessSimulationTests.environment("RELAY_CAPTURE_SEEDS") ?? 60
    var failed = 0
    var checks = 0
    for seed in 1...count {
      let sim = TwinSim(seed: seed &+ 7_000)
      var pick = SeededRandom(seed: seed ^ 0x5EED)
      let restoreAt = 10 + pick.below(150)
      while sim.step < 300 && sim.failures.isEmpty {
        sim.step += 1
        if sim.step == restoreAt || (sim.twin != nil && pick.chance(3)) { sim.restoreTwin() }
        sim.randomInput()
        guard pick.chance(25) else { continue }
        checks += 1
        Self.check(sim.primary, sim, "primary")
        if let twin = sim.twin { Self.check(twin, sim, "twin") }
      }
      Self.check(sim.primary, sim, "primary at the end")
      guard !sim.failures.isEmpty else { continue }
      failed += 1
      Issue.record("capture seed \(seed):\n\(sim.failures.joined(separator: "\n"))")
      if failed >= 3 { break }
    }
    #expect(checks > 1_000, "too few captures compared")
  }

  /// A message rebuilds its connection's record when its effects are taken, and a
  /// new user's hello its pairs: a capture then finds nothing to build, however many
  /// connections sent something since the last one.
  @Test func inputsSettleTheirOwnRecordsSoCapturesFindNoBacklog() {
    let h = Harness {
      $0.joinRate = 1_000_000
      $0.sessionJoinRate = 1_000_000
    }
    for i in 1...3_000 { h.join(UInt64(i), uid: "u\(i)", session: "s\(i % 7)") }
    _ = h.out()
    #expect(h.core.snapshotCache.connections.heldRecords == 0, "a core never captured keeps nothing")
    _ = h.core.snapshotParts()
    #expect(h.core.snapshotCache.connections.heldRecords == 3_000)
    let connections = h.core.snapshotCache.connections.settled
    let users = h.core.snapshotCache.users.settled
    h.send(5, #"{"type":"message.send","session":"s5","data":{}}"#)
    _ = h.out()
    #expect(h.core.snapshotCache.connections.settled == connections + 1, "one record for one message")
    h.join(9_001, uid: "late", session: "s1")
    _ = h.out()
    #expect(h.core.snapshotCache.users.settled == users + 1)
    let settledBefore = h.core.snapshotCache.connections.settled
    let before = h.core.snapshot()
    #expect(h.core.snapshotCache.connections.settled == settledBefore, "the capture built nothing")
    #expect(before == h.core.snapshotParts(reusing: false).joined())
  }

  /// A core that keeps its records from the start (a replica's) builds none at its
  /// first capture, members included, and captures the bytes a fresh capture gives.
  @Test func aCoreKeptFromTheStartCapturesWithoutBuilding() {
    let h = Harness {
      $0.joinRate = 1_000_000
      $0.sessionJoinRate = 1_000_000
    }
    h.core.keepSnapshotRecords()
    for i in 1...500 { h.join(UInt64(i), uid: "u\(i % 300)", session: "s\(i % 7)") }
    _ = h.out()
    let settled = h.core.snapshotCache.connections.settled
    let parts = h.core.snapshotParts()
    #expect(h.core.snapshotCache.connections.settled == settled, "the capture built nothing")
    #expect(h.core.sessions.values.allSatisfy { $0.hasKeptMemberRecords })
    #expect(parts.joined() == h.core.snapshotParts(reusing: false).joined())
  }

  /// A restored core holds every record from the restore on: its first capture
  /// builds none, and gives the bytes it was restored from.
  @Test func aRestoredCoreCapturesWithoutBuilding() throws {
    let h = Harness()
    for i in 1...500 { h.join(UInt64(i), uid: "u\(i % 300)", session: "s\(i % 7)") }
    _ = h.out()
    let bytes = h.core.snapshot()
    let restored = try RelayCore(
      restoring: bytes, config: h.core.config, ids: SeededIDs(), verifyToken: { _, _ in nil }, canonical: false)
    #expect(restored.snapshotCache.connections.heldRecords == 500)
    #expect(restored.snapshot() == bytes)
    #expect(restored.snapshotCache.connections.settled == 0)
    #expect(restored.snapshotCache.users.settled == 0)
  }
}
