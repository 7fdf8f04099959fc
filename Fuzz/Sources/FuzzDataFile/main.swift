// The reader of the data dir's files (Sources/RelayCluster/DataFile.swift) on
// arbitrary bytes: a crash mid-write, a flipped bit or a stranger's file must give
// a header verdict, records, and a torn tail or damage at an offset inside the file —
// never a trap (protocol/PROTOCOL.md §12a). The records read are applied to a replica
// as a restart does, and each frame is also tried as a snapshot.
import FuzzDriver
import RelayCluster
import RelayCore

func fakeHMAC(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] { Array((key + message + [UInt8](repeating: 7, count: 32)).prefix(32)) }

let coreConfig = CoreConfig(devMode: true, serverVersion: "fuzz")

let rules = ClusterRules(rules: 1, configDigest: [1, 2, 3])
let expected = DataFileHeader(kind: .log, rules: 1, seed: [UInt8](repeating: 1, count: 32))

func joinedReplica() -> Replica {
  let ids = LogIdentifiers(seed: [9], hmac: fakeHMAC)
  let core = RelayCore(config: coreConfig, ids: ids, verifyToken: { _, _ in nil })
  let replica = Replica(core: core, ids: ids, config: ReplicaConfig(nodeTimeoutMs: 5_000, limits: LogLimits(maxTextBytes: 4_096)))
  let join = LogBatch(node: 0, inputs: [.join(JoinRequest(name: "n", nonce: 1, rules: rules))])
  _ = replica.apply(RawRecord(id: "0-1", batch: join.encoded(), position: Array("1".utf8), timeMs: Array("1000".utf8)))
  return replica
}

func fuzzDataFile(_ input: UnsafeBufferPointer<UInt8>) {
  let bytes = Array(input)
  _ = DataFileHeader.check(bytes, kind: .log, expected: expected)
  _ = DataFileHeader.check(bytes, kind: .snapshot, expected: expected)
  let replica = joinedReplica()
  var reader = DataFileReader(bytes)
  var last = reader.offset
  while let raw = reader.nextRecord() {
    precondition(reader.offset > last && reader.offset <= bytes.count, "the reader moves forward within the file")
    last = reader.offset
    _ = replica.apply(raw)
  }
  if let damage = reader.damage { precondition(damage.offset >= 0 && damage.offset <= bytes.count, "damage inside the file") }
  var frames = DataFileReader(bytes, from: 0)
  while let range = frames.next() {
    _ = try? Replica.restore(Array(bytes[range]), ids: LogIdentifiers(seed: [9], hmac: fakeHMAC), config: replica.config) {
      core, ids throws(BinaryError) in
      try RelayCore(restoring: core, config: coreConfig, ids: ids, verifyToken: { _, _ in nil })
    }
  }
}

runFuzzer { data, size in
  fuzzDataFile(buffer(data, size))
  return 0
}
