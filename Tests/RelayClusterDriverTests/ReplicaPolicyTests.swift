import RelayClusterDriver
import Testing

/// `--redis-min-replicas` and its one relaxation, the readers' waits, and the check of
/// a log's history after a failover (ReplicaPolicy.swift).
@Suite struct ReplicaPolicyTests {
  @Test func logHistoryComparesStreamIds() {
    // The entry this node applied last is still there.
    #expect(LogHistory.check(lastApplied: "5-1", found: "5-1", first: "1-0") == .intact)
    // Gone, while the log starts before it: the tail was lost (a failover).
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: "1-0") == .behind)
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: "5-0") == .behind)
    // Gone because the log now starts after it: trimmed behind a snapshot.
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: "5-2") == .trimmed)
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: "10-0") == .trimmed)
    // Numeric, not textual, order; an empty log or a malformed id cannot vouch for it.
    #expect(LogHistory.check(lastApplied: "9-0", found: nil, first: "10-0") == .trimmed)
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: nil) == .behind)
    #expect(LogHistory.check(lastApplied: "5-1", found: nil, first: "x") == .behind)
    #expect(LogHistory.streamKey("18446744073709551615-3") != nil)
    #expect(LogHistory.streamKey("1-2-3") == nil && LogHistory.streamKey("-1") == nil)
  }

  /// A primary is held to the most replicas it has been seen with; a new primary (a
  /// promoted replica) starts again from none.
  @Test func replicasSeenArePerPrimary() {
    let a = "127.0.0.1:7001"
    let b = "127.0.0.1:7002"
    var seen = ReplicasSeen()
    #expect(seen.most(on: a) == 0)
    seen.note(1, on: a)
    seen.note(0, on: a)  // its replica died: still held to one
    #expect(seen.most(on: a) == 1 && seen.most(on: b) == 0)
    seen.note(0, on: b)  // the failover's new primary, alone
    #expect(seen.most(on: b) == 0 && seen.most(on: a) == 0)
    seen.note(2, on: b)
    #expect(seen.most(on: b) == 2)
  }

  /// The relaxation holds only after a failover this node followed: the first
  /// primary, seen with no replica yet (started before the replica's first sync),
  /// is held to N; a promoted primary alone is held to what it has had.
  @Test func replicasRequiredFromTheFirstAppend() {
    let a = "127.0.0.1:7001"
    let b = "127.0.0.1:7002"
    var seen = ReplicasSeen()
    #expect(seen.required(1, on: a) == 1)
    seen.note(0, on: a)
    #expect(seen.required(1, on: a) == 1 && !seen.followedFailover)
    seen.note(1, on: a)
    #expect(seen.required(2, on: a) == 2)
    seen.note(0, on: b)
    #expect(seen.followedFailover && seen.required(1, on: b) == 0)
    seen.note(1, on: b)
    #expect(seen.required(1, on: b) == 1 && seen.required(3, on: b) == 1)
  }

  /// Without Sentinel nothing promotes a replica: always N, whatever was seen.
  @Test func withoutSentinelAlwaysN() {
    var policy = ReplicaPolicy(minReplicas: 1, followsFailovers: false)
    policy.primary = "a:1"
    policy.note(0)
    policy.primary = "b:1"
    policy.note(0)
    #expect(policy.required == 1)
    var followed = ReplicaPolicy(minReplicas: 1, followsFailovers: true)
    followed.primary = "a:1"
    followed.note(1)
    followed.primary = "b:1"
    followed.note(0)
    #expect(followed.required == 0)
  }

  /// A reader applies a batch only once N replicas hold it; a refused probe or an
  /// error reads afresh; an ended connection waits for the reconnect.
  @Test func readersWaitForTheReplicas() {
    var policy = ReplicaPolicy(minReplicas: 2, followsFailovers: false)
    #expect(policy.readWait(.count(1), probed: true) == .waitAgain(held: 1))
    #expect(policy.readWait(.count(2), probed: true) == .apply)
    #expect(policy.readWait(.count(2), probed: false) == .drop(nil))
    #expect(policy.readWait(.error("READONLY"), probed: true) == .drop("READONLY"))
    #expect(policy.readWait(nil, probed: false) == .ended)
  }
}
