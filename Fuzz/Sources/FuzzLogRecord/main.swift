// The cluster's log records (Sources/RelayCluster: LogEntry.swift, Replica.swift) on
// arbitrary bytes: records come from a Redis that anything with write access can
// XADD to, so decoding and applying any sequence of them gives a rejection or an
// applied input, never a trap (docs/cluster.md, "Records are untrusted input"). The
// input is cut into records: each takes a position offset, a time choice and a batch;
// two replicas must agree on every outcome. The tail is also restored as a replica
// snapshot.
import FuzzDriver
import RelayCluster
import RelayCore

/// The replicas' id source needs no real MAC here: any fixed function keeps them equal.
func fakeHMAC(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] { Array((key + message + [UInt8](repeating: 7, count: 32)).prefix(32)) }

let coreConfig = CoreConfig(devMode: true, serverVersion: "fuzz")

let rules = ClusterRules(rules: 1, configDigest: [1, 2, 3])

func joinedReplica() -> Replica {
  let ids = LogIdentifiers(seed: [9], hmac: fakeHMAC)
  let core = RelayCore(config: coreConfig, ids: ids, verifyToken: { _, _ in nil })
  let replica = Replica(core: core, ids: ids, config: ReplicaConfig(nodeTimeoutMs: 5_000, limits: LogLimits(maxTextBytes: 4_096)))
  for n in 1...3 {
    let join = LogBatch(node: 0, inputs: [.join(JoinRequest(name: "n\(n)", nonce: UInt64(n), rules: rules))])
    _ = replica.apply(RawRecord(id: "0-\(n)", batch: join.encoded(), position: Array(String(n).utf8), timeMs: Array("1000".utf8)))
  }
  return replica
}

let times: [[UInt8]?] = [nil, Array("1001".utf8), Array("0".utf8), Array("140737488355328".utf8), Array("99999999999999999999".utf8), Array("-1".utf8), Array("2000".utf8)]

func describe(_ a: Applied) -> String {
  "\(a.rejected ?? "")|\(a.deaths)|\(a.effects.count)|\(a.joined.map(\.number))|\(a.lostRecords)|\(a.snapshotDue ?? 0)"
}

func fuzzLogRecord(_ input: UnsafeBufferPointer<UInt8>) {
  let bytes = Array(input)
  let a = joinedReplica()
  let b = joinedReplica()
  var i = 0
  var clock: Int64 = 1_000
  while i + 4 <= bytes.count {
    let offset = Int(bytes[i]) % 4
    let timeChoice = Int(bytes[i + 1])
    let length = min(Int(bytes[i + 2]) | Int(bytes[i + 3]) << 8, bytes.count - i - 4)
    let batch = Array(bytes[(i + 4)..<(i + 4 + length)])
    i += 4 + length
    clock += Int64(timeChoice)
    let t = timeChoice < times.count ? times[timeChoice] : Array(String(clock).utf8)
    let raw = RawRecord(id: "r\(i)", batch: batch, position: Array(String(Int(a.position) + offset).utf8), timeMs: t)
    precondition(describe(a.apply(raw)) == describe(b.apply(raw)), "replicas disagree on a record")
  }
  precondition(a.snapshot() == b.snapshot(), "replicas disagree on their state")
  _ = try? Replica.restore(bytes, ids: LogIdentifiers(seed: [9], hmac: fakeHMAC), config: a.config) { core, ids throws(BinaryError) in
    try RelayCore(restoring: core, config: coreConfig, ids: ids, verifyToken: { _, _ in nil })
  }
}

runFuzzer { data, size in
  fuzzLogRecord(buffer(data, size))
  return 0
}
