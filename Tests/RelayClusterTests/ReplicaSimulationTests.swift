// A seeded simulation of the cluster's replication (docs/cluster.md): several nodes
// log inputs into one shared log, with faults (paused nodes declared dead and writing
// afterwards, appends lost, replicas lagging, a replica that joins late and replays
// everything), and every replica must end in the same state having produced the same
// effects for every entry: the property that makes members on different nodes see
// one relay.
import RelayCore
import RelayCrypto
import RelayProtocol
import Testing

@testable import RelayCluster
import RelayPrimitives

private final class SimNode {
  let number: UInt32
  var replica: Replica
  var cursor = 0
  /// Fingerprint of the effects of each applied entry, by log index.
  var fingerprints: [String] = []
  var pausedUntilMs: Int64 = 0
  var nextLocal: UInt64 = 1
  /// This node's open sockets, as the shell would hold them.
  var open: [UInt64] = []

  init(number: UInt32, seed: [UInt8], config: CoreConfig, timeoutMs: Int64) {
    self.number = number
    replica = makeReplica(seed: seed, config: config, timeoutMs: timeoutMs)
    replica.localNode = number
  }

  func catchUp(_ log: [RawRecord], to end: Int) {
    while cursor < min(end, log.count) {
      let applied = replica.apply(log[cursor])
      fingerprints.append(fingerprint(applied))
      if applied.snapshotDue != nil { snapshots.append((cursor, replica.snapshot())) }
      cursor += 1
    }
  }

  /// Snapshots taken at the positions the replica named: (log index, bytes).
  var snapshots: [(index: Int, bytes: [UInt8])] = []
}

func hmac(_ key: [UInt8], _ message: [UInt8]) -> [UInt8] { Crypto.hmacSHA256(key: key, message: message) }

func replicaConfig(timeoutMs: Int64, snapshotRecords: UInt64 = 50) -> ReplicaConfig {
  var c = ReplicaConfig(nodeTimeoutMs: timeoutMs, limits: LogLimits(maxTextBytes: 65_536))
  c.snapshotRecords = snapshotRecords
  return c
}

func makeReplica(seed: [UInt8], config: CoreConfig, timeoutMs: Int64) -> Replica {
  let ids = LogIdentifiers(seed: seed, hmac: hmac)
  let core = RelayCore(config: config, ids: ids, verifyToken: { _, _ in nil })
  return Replica(core: core, ids: ids, config: replicaConfig(timeoutMs: timeoutMs))
}

func restoreReplica(_ bytes: [UInt8], seed: [UInt8], config: CoreConfig, timeoutMs: Int64) throws -> Replica {
  try Replica.restore(bytes, ids: LogIdentifiers(seed: seed, hmac: hmac), config: replicaConfig(timeoutMs: timeoutMs)) {
    b, ids throws(BinaryError) in
    try RelayCore(restoring: b, config: config, ids: ids, verifyToken: { _, _ in nil })
  }
}

/// A stream entry as the append script writes it.
func record(_ position: Int, at timeMs: Int64, node: UInt32, _ inputs: [LogInput]) -> RawRecord {
  RawRecord(
    id: "\(timeMs)-\(position)", batch: LogBatch(node: node, inputs: inputs).encoded(),
    position: Array(String(position).utf8), timeMs: Array(String(timeMs).utf8))
}

let testRules = ClusterRules(rules: 1, configDigest: [7, 7])

private func fingerprint(_ applied: Applied) -> String {
  var s = "d\(applied.deaths)"
  for e in applied.effects {
    switch e {
    case .send(let p, let to): s += "|s\(to.map(\.raw)):" + String(decoding: p.bytes, as: UTF8.self)
    case .close(let c, let code, _): s += "|c\(c.raw):\(code)"
    case .webhook(let ev, let body): s += "|w\(ev):" + String(decoding: body.bytes, as: UTF8.self)
    case .push(let job): s += "|u\(job)"
    }
  }
  for (r, result) in applied.admin { s += "|a\(r):\(result)" }
  if let why = applied.rejected { s += "|r" + why }
  return s
}

private struct World {
  var rng: SeededRandom
  var nowMs: Int64 = 1_800_000_000_000
  var log: [RawRecord] = []
  /// The append script's counter: records written by hand do not move it.
  var positions = 0
  var nodes: [SimNode] = []
  let config: CoreConfig
  let seed: [UInt8]
  let timeoutMs: Int64 = 2_000

  init(seed: UInt64) {
    rng = SeededRandom(seed: seed)
    var c = CoreConfig(devMode: true, serverVersion: "sim")
    c.graceMs = 3_000
    c.idleTimeoutMs = 20_000
    c.ringTimeoutMs = 4_000
    c.handRate = 1_000
    c.messageRate = 1_000
    config = c
    self.seed = Array("seed-\(seed)".utf8)
    for n in 1...3 {
      let node = SimNode(number: UInt32(n), seed: self.seed, config: c, timeoutMs: timeoutMs)
      nodes.append(node)
      let join = JoinRequest(name: "n\(n)", nonce: UInt64(n), rules: testRules)
      positions += 1
      log.append(record(positions, at: nowMs, node: 0, [.join(join)]))
    }
  }

  mutating func append(_ node: SimNode, _ input: LogInput) {
    // A paused node writes late: its records land after its death was declared.
    positions += 1
    log.append(record(positions, at: nowMs, node: node.number, [input]))
  }

  mutating func text(_ node: SimNode, _ c: UInt64, _ json: String) {
    append(node, .text(connection: c, Array(json.utf8)))
  }

  mutating func step() {
    let node = nodes[rng.below(nodes.count)]
    let paused = nowMs < node.pausedUntilMs
    let uid = "u\(rng.below(5))"
    let session = "s\(rng.below(2))"
    switch rng.below(15) {
    case 0, 1:
      let c = Replica.connectionID(node: node.number, local: node.nextLocal).raw
      node.nextLocal += 1
      node.open.append(c)
      append(node, .open(connection: c))
      text(node, c, #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid)"},"device":"d\#(c % 3)"}"#)
      // §9a: every device registers, so calls push the asleep ones on every replica.
      text(node, c, #"{"type":"push.register","token":"t-\#(uid)-\#(c % 3)","kind":"fcm"}"#)
    case 2, 3:
      guard let c = node.open.randomElement(using: &rng) else { return }
      text(node, c, #"{"type":"session.join","id":"j","session":"\#(session)"}"#)
    case 4:
      guard let c = node.open.randomElement(using: &rng) else { return }
      text(node, c, #"{"type":"hand.raise","session":"\#(session)"}"#)
    case 5:
      guard let c = node.open.randomElement(using: &rng) else { return }
      text(node, c, #"{"type":"hand.lower","session":"\#(session)"}"#)
    case 6:
      guard let c = node.open.randomElement(using: &rng) else { return }
      text(node, c, #"{"type":"message.send","session":"\#(session)","data":\#(rng.below(100))}"#)
    case 7:
      guard let c = node.open.randomElement(using: &rng) else { return }
      text(node, c, #"{"type":"call.initiate","id":"c","to":["\#(uid)"],"callType":"audio"}"#)
    case 8:
      guard !node.open.isEmpty else { return }
      let c = node.open.remove(at: rng.below(node.open.count))
      append(node, .closed(connection: c, clean: rng.below(2) == 0))
    case 9:
      // A lost append: the input never reaches the log, so no replica sees it.
      _ = node.open.randomElement(using: &rng)
    case 10:
      if !paused, rng.below(6) == 0 { node.pausedUntilMs = nowMs + timeoutMs + Int64(rng.below(3_000)) }
    case 11:
      append(node, .admin(request: UInt64(rng.below(1000)), .removeParticipant(session: session, uid: uid)))
      append(node, .admin(request: UInt64(rng.below(1000)), .removePushToken(uid: uid, token: "t-\(uid)-\(rng.below(3))")))
    case 13:
      // A record XADDed by hand: garbage at the next position, a stale or skipping
      // position, a time out of range, or a node that never joined.
      var raw = record(positions + 1, at: nowMs, node: UInt32(rng.below(3) == 0 ? 9 : Int(node.number)), [.beat])
      switch rng.below(4) {
      case 0: raw.batch = (0..<rng.below(30)).map { _ in UInt8(rng.below(256)) }
      case 1: raw.position = Array(String(max(1, positions - rng.below(3))).utf8)
      case 2: raw.timeMs = Array(String(Int64(1) << 50).utf8)
      default: raw.position = Array(String(positions + 2 + rng.below(5)).utf8)
      }
      log.append(raw)
      // The legitimate record counted at the position the crafted one may have taken.
      append(node, .beat)
    default:
      nowMs += Int64(rng.below(700))
      // Live nodes beat; the ticker ticks.
      for n in nodes where nowMs >= n.pausedUntilMs { append(n, .beat) }
      append(node, .tick)
    }
    // Replicas read the log at their own pace; one of them lags.
    for (i, n) in nodes.enumerated() { n.catchUp(log, to: i == 2 && rng.below(3) == 0 ? n.cursor : log.count) }
  }
}

@Suite struct ReplicaSimulationTests {
  @Test(arguments: Array(UInt64(1)...UInt64(60)))
  func replicasAgreeOnEveryRecord(seed: UInt64) throws {
    var world = World(seed: seed)
    for _ in 0..<400 { world.step() }
    // A node that joins late replays the whole log and must reach the same state.
    let late = SimNode(number: 99, seed: world.seed, config: world.config, timeoutMs: world.timeoutMs)
    world.nodes.append(late)
    for n in world.nodes { n.catchUp(world.log, to: world.log.count) }
    let reference = world.nodes[0]
    for n in world.nodes.dropFirst() {
      #expect(n.fingerprints == reference.fingerprints, "seed \(seed): node \(n.number) diverged")
      #expect(n.replica.snapshot() == reference.replica.snapshot(), "seed \(seed): node \(n.number) state")
    }
    // A node that starts from the newest snapshot and reads only the tail produces the
    // same effects for the tail and ends in the same state.
    #expect(late.snapshots.map(\.bytes) == reference.snapshots.map(\.bytes), "every replica writes the same snapshot bytes")
    // A restart from a snapshot that is not the newest reads through later snapshot positions.
    let (index, bytes) = try #require(reference.snapshots.dropLast(Int(seed % 2)).last ?? reference.snapshots.last)
    let restored = try restoreReplica(bytes, seed: world.seed, config: world.config, timeoutMs: world.timeoutMs)
    var tail: [String] = []
    for r in world.log[(index + 1)...] { tail.append(fingerprint(restored.apply(r))) }
    #expect(tail == Array(reference.fingerprints[(index + 1)...]), "seed \(seed): restored replica diverged")
    #expect(restored.snapshot() == reference.replica.snapshot())
  }

  /// The durable node applies its own records from its turn buffer and a restart
  /// applies a data file's numeric frames (`apply(batch:)`): both must do exactly what
  /// the record's bytes do, crafted and rejected records included.
  @Test(arguments: Array(UInt64(1)...UInt64(20)))
  func everyFormOfARecordAppliesAlike(seed: UInt64) {
    var world = World(seed: seed)
    for _ in 0..<300 { world.step() }
    let forms = (0..<3).map { _ in makeReplica(seed: world.seed, config: world.config, timeoutMs: world.timeoutMs) }
    for form in forms { form.localNode = 1 }
    for raw in world.log {
      let reference = fingerprint(forms[0].apply(raw))
      guard let p = raw.position.flatMap({ UInt64(String(decoding: $0, as: UTF8.self)) }),
        let t = raw.timeMs.flatMap({ Int64(String(decoding: $0, as: UTF8.self)) }), let bytes = raw.batch
      else {
        for form in forms.dropFirst() { #expect(fingerprint(form.apply(raw)) == reference) }
        continue
      }
      #expect(fingerprint(forms[1].apply(batch: bytes[...], position: p, timeMs: t)) == reference, "seed \(seed)")
      #expect(fingerprint(applyAsOwnRecord(forms[2], bytes, position: p, timeMs: t)) == reference, "seed \(seed)")
    }
    #expect(forms[1].snapshot() == forms[0].snapshot())
    #expect(forms[2].snapshot() == forms[0].snapshot())
  }

  /// A replica with the three joins of `World` applied, numbers 1…3.
  private func joined(timeoutMs: Int64 = 1_000) -> (Replica, Int64) {
    let config = CoreConfig(devMode: true, serverVersion: "t")
    let r = makeReplica(seed: [1], config: config, timeoutMs: timeoutMs)
    r.localNode = 1
    let t: Int64 = 1_800_000_000_000
    for n in 1...3 {
      let a = r.apply(record(n, at: t, node: 0, [.join(JoinRequest(name: "n\(n)", nonce: UInt64(n * 10), rules: testRules))]))
      #expect(a.joined.map(\.number) == [UInt32(n)])
    }
    return (r, t)
  }

  @Test func deadNodesConnectionsEndAsLostAndItsLaterRecordsAreRejected() {
    let (r, start) = joined()
    var t = start
    func apply(_ node: UInt32, _ input: LogInput) -> Applied {
      r.apply(record(Int(r.position) + 1, at: t, node: node, [input]))
    }
    let a = Replica.connectionID(node: 1, local: 1).raw
    let b = Replica.connectionID(node: 2, local: 1).raw
    for (n, c, uid) in [(UInt32(1), a, "alice"), (2, b, "bob")] {
      _ = apply(n, .open(connection: c))
      _ = apply(n, .text(connection: c, Array(#"{"type":"hello","dev":{"uid":"\#(uid)","name":"x"}}"#.utf8)))
      _ = apply(n, .text(connection: c, Array(#"{"type":"session.join","session":"s"}"#.utf8)))
    }
    _ = apply(3, .leave)
    // Node 1 keeps beating; node 2 is silent past the timeout.
    for _ in 0..<2 {
      t += 400
      #expect(apply(1, .beat).deaths.isEmpty)
    }
    t += 300
    let death = apply(1, .tick)
    #expect(death.deaths == [2])
    let lost = death.effects.contains {
      if case .send(let p, let to) = $0 { return to == [ConnectionID(a)] && String(decoding: p.bytes, as: UTF8.self).contains("participant.lost") }
      return false
    }
    #expect(lost)
    #expect(r.ticker == 1)
    // Node 2 wakes and writes with its old identity: rejected, nothing happens.
    let late = apply(2, .text(connection: b, Array(#"{"type":"hand.raise","session":"s"}"#.utf8)))
    #expect(late.effects.isEmpty)
    #expect(late.rejected == "node 2 is not live")
    // A silence of the whole log is nobody's death.
    t += 5_000
    #expect(apply(1, .beat).deaths.isEmpty)
    // A rejoin gets a number never used before in this generation.
    let rejoin = apply(0, .join(JoinRequest(name: "n2", nonce: 99, rules: testRules)))
    #expect(rejoin.joined.map(\.number) == [4])
  }

  @Test func recordsFromUnknownOrZeroNodesAndForeignJoinsAreRefused() {
    let (r, t) = joined()
    #expect(r.apply(record(4, at: t, node: 77, [.beat])).rejected == "node 77 is not live")
    #expect(r.apply(record(5, at: t, node: 0, [.beat])).rejected == "node 0 may only join or hand over")
    var other = testRules
    other.configDigest = [1]
    let refused = r.apply(record(6, at: t, node: 0, [.join(JoinRequest(name: "x", nonce: 5, rules: other))]))
    #expect(refused.joined.isEmpty)
    #expect(refused.refusedJoins.first?.reason.contains("shared flags") == true)
    other = testRules
    other.rules = 2
    let newer = r.apply(record(7, at: t, node: 0, [.join(JoinRequest(name: "x", nonce: 6, rules: other))]))
    #expect(newer.refusedJoins.first?.reason.contains("rules version 2") == true)
    #expect(r.position == 7, "a rejected record still takes its position")
  }

  /// Crafted records: nothing traps, the log goes on, and every replica rejects
  /// exactly the same records.
  @Test(arguments: Array(UInt64(1)...UInt64(20)))
  func craftedRecordsNeverTrapAndAreRejectedAlike(seed: UInt64) {
    var rng = SeededRandom(seed: seed)
    let (a, t) = joined()
    let (b, _) = joined()
    let hostile: [[UInt8]] = [
      String(Int64.max).utf8.map { $0 }, Array("-5".utf8), Array("1e30".utf8), Array("140737488355328".utf8),
      Array("99999999999999999999".utf8), [], Array(String(t).utf8),
    ]
    for i in 0..<400 {
      let position = Int(a.position) + [1, 1, 1, 0, 2, 1 << 20][rng.below(6)]
      var raw = record(position, at: t + Int64(i), node: UInt32(rng.below(5)), [.beat])
      switch rng.below(6) {
      case 0: raw.timeMs = hostile[rng.below(hostile.count)]
      case 1: raw.batch = (0..<rng.below(40)).map { _ in UInt8(rng.below(256)) }
      case 2: raw.position = hostile[rng.below(hostile.count)]
      case 3:
        if var bytes = raw.batch, !bytes.isEmpty {
          bytes[rng.below(bytes.count)] ^= UInt8(1 + rng.below(255))
          raw.batch = bytes
        }
      case 4:
        let c = Replica.connectionID(node: 1, local: UInt64(rng.below(4))).raw
        raw.batch = LogBatch(node: 1, inputs: [.open(connection: c), .text(connection: c, [123, 125]), .tick]).encoded()
      default: break
      }
      let x = a.apply(raw)
      let y = b.apply(raw)
      #expect(fingerprint(x) == fingerprint(y))
    }
    #expect(a.snapshot() == b.snapshot())
    // The log still works after all that.
    let p = Int(a.position) + 1
    #expect(a.apply(record(p, at: t + 10_000, node: 1, [.beat])).rejected == nil || a.nodes[1] == nil)
  }

  @Test func aTimeFarInTheFutureMovesTheClockOnceNotForGood() {
    let (r, t) = joined(timeoutMs: 100_000)
    _ = r.apply(record(4, at: t + 1_000, node: 1, [.beat]))
    #expect(r.clockMs == t + 1_000)
    _ = r.apply(record(5, at: t + 50_000_000, node: 1, [.beat]))  // crafted
    let after = r.clockMs
    _ = r.apply(record(6, at: t + 2_000, node: 1, [.beat]))
    _ = r.apply(record(7, at: t + 3_000, node: 1, [.beat]))
    #expect(r.clockMs == after + 1_000, "legit records move the clock by their own steps again")
  }

  @Test func aHoleInPositionsIsRealOnlyWhenTheLogContinuesPastIt() {
    let (r, t) = joined()
    let skip = r.apply(record(10, at: t, node: 1, [.beat]))
    #expect(skip.rejected != nil && !skip.lostRecords)
    #expect(r.apply(record(4, at: t, node: 1, [.beat])).rejected == nil, "a single crafted jump changes nothing")
    _ = r.apply(record(9, at: t, node: 1, [.beat]))
    let lost = r.apply(record(10, at: t, node: 1, [.beat]))
    #expect(lost.lostRecords)
  }

  @Test func aReplicaThatDisagreesWithTheStoredDigestNoticesIt() throws {
    let (r, t) = joined()
    r.noteLocalDigest([1, 2, 3], at: 3)
    #expect(r.apply(record(4, at: t, node: 2, [.digest(position: 3, digest: [9], stored: false)])).diverged == nil)
    #expect(r.apply(record(5, at: t, node: 2, [.digest(position: 3, digest: [1, 2, 3], stored: true)])).diverged == nil)
    #expect(r.apply(record(6, at: t, node: 2, [.digest(position: 3, digest: [9], stored: true)])).diverged == 3)
  }

  /// The shell digests off its loop, so the stored digest of a position may be applied
  /// before this replica's own is ready: the comparison then happens when it is.
  @Test func aStoredDigestAppliedBeforeTheLocalOneIsComparedWhenItArrives() throws {
    let (r, t) = joined()
    #expect(r.apply(record(4, at: t, node: 2, [.digest(position: 3, digest: [9], stored: true)])).diverged == nil)
    #expect(r.apply(record(5, at: t, node: 2, [.digest(position: 4, digest: [1], stored: true)])).diverged == nil)
    #expect(r.noteLocalDigest([1, 2, 3], at: 3), "disagrees with the stored digest of position 3")
    #expect(!r.noteLocalDigest([1], at: 4), "agrees with the stored digest of position 4")
    #expect(!r.noteLocalDigest([7], at: 5), "nothing stored for position 5 yet")
    #expect(r.apply(record(6, at: t, node: 2, [.digest(position: 5, digest: [7], stored: true)])).diverged == nil)
  }

  @Test func snapshotsAreDueByRecordsAndRestoreRefusesHostileBytes() throws {
    let (r, t) = joined()
    var due: [UInt64] = []
    for p in 4...120 {
      if let d = r.apply(record(p, at: t + Int64(p), node: 1, [.beat])).snapshotDue { due.append(d) }
    }
    #expect(due == [50, 100])
    let config = CoreConfig(devMode: true, serverVersion: "t")
    let bytes = r.snapshot()
    let back = try restoreReplica(bytes, seed: [1], config: config, timeoutMs: 1_000)
    #expect(back.snapshot() == bytes)
    for cut in stride(from: 0, to: bytes.count, by: 7) {
      #expect(throws: BinaryError.self) { try restoreReplica(Array(bytes.prefix(cut)), seed: [1], config: config, timeoutMs: 1_000) }
    }
    var rng = SeededRandom(seed: 3)
    for _ in 0..<300 {
      var flipped = bytes
      flipped[rng.below(flipped.count)] ^= UInt8(1 + rng.below(255))
      _ = try? restoreReplica(flipped, seed: [1], config: config, timeoutMs: 1_000)
    }
  }

  @Test func anUpgradeSealsTheGenerationAndEndsEveryConnectionAsLost() {
    let (r, t) = joined()
    let c = Replica.connectionID(node: 2, local: 1).raw
    _ = r.apply(record(4, at: t, node: 2, [.open(connection: c)]))
    let up = r.apply(record(5, at: t, node: 0, [.upgrade(rules: 2)]))
    #expect(up.upgrade?.rules == 2 && up.upgrade?.handoffBy == 1)
    #expect(up.snapshotDue == 5)
    #expect(r.nodes.isEmpty && r.sealed)
    #expect(r.apply(record(6, at: t, node: 0, [.join(JoinRequest(name: "x", nonce: 1, rules: testRules))])).rejected != nil)
  }

  @Test func batchesRoundTripAndForeignBytesAreRefused() {
    let limits = LogLimits(maxTextBytes: 16)
    let fcm = PushRegistrationFields(token: "f", kind: "fcm", environment: nil, device: nil)
    let apns = PushRegistrationFields(token: String(repeating: "a", count: 64), kind: "apns", environment: "sandbox", device: nil)
    let inputs: [LogInput] = [
      .join(JoinRequest(name: "n-1", nonce: 9, rules: testRules)), .leave, .beat, .tick,
      .open(connection: 1 << 41 | 9), .text(connection: 12, [0, 1, 2, 255]), .closed(connection: 12, clean: true),
      .admin(request: 77, .createSession), .admin(request: 78, .removeParticipant(session: "s", uid: "ü")),
      .admin(request: 79, .call(.reject(.busy), callId: "c", token: "t.t.t")),
      .admin(request: 80, .sessionInfo(session: "s")), .admin(request: 81, .callInfo(callId: "c", token: "t")),
      .digest(position: 5, digest: [1, 2], stored: true), .upgrade(rules: 3),
      .admin(request: 82, .pushDevice(.register(fcm), device: "d", token: "t")),
      .admin(request: 83, .pushDevice(.register(apns), device: "d", token: "t")),
      .admin(request: 84, .pushDevice(.unregister, device: "d", token: "t")),
      .admin(request: 85, .removePushToken(uid: "u", token: "f")),
    ]
    for input in inputs {
      let bytes = LogBatch(node: 3, inputs: [input]).encoded()
      #expect(LogBatch(decoding: bytes, limits: limits) == LogBatch(node: 3, inputs: [input]))
      #expect(LogBatch(decoding: bytes + [0], limits: limits) == nil)
      #expect(LogBatch(decoding: Array(bytes.dropLast()), limits: limits) == nil)
    }
    let all = LogBatch(node: 2, inputs: inputs)
    #expect(LogBatch(decoding: all.encoded(), limits: limits) == all)
    #expect(LogBatch(decoding: [], limits: limits) == nil)
    #expect(LogBatch(decoding: [LogBatch.formatVersion, 1, 0, 0, 0], limits: limits) == nil, "no inputs")
    #expect(LogBatch(decoding: [1, 1, 0, 0, 0, 1, 0, 0, 0, 3], limits: limits) == nil, "another format version")
    // A registration a request could not have made (not hex for an APNs kind) is refused.
    let forged = PushRegistrationFields(token: "not-hex", kind: "apns", environment: nil, device: nil)
    let bad = LogBatch(node: 1, inputs: [.admin(request: 1, .pushDevice(.register(forged), device: "d", token: "t"))])
    #expect(LogBatch(decoding: bad.encoded(), limits: limits) == nil, "a token push.register would refuse")
    let long = LogBatch(node: 1, inputs: [.text(connection: 1, Array(repeating: 1, count: 17))]).encoded()
    #expect(LogBatch(decoding: long, limits: limits) == nil, "a text longer than a socket could deliver")
  }

  @Test func logIdentifiersAreSharedBySeedAndDifferAcrossSeeds() {
    let hmac: ([UInt8], [UInt8]) -> [UInt8] = { Crypto.hmacSHA256(key: $0, message: $1) }
    let a = LogIdentifiers(seed: [1, 2], hmac: hmac)
    let b = LogIdentifiers(seed: [1, 2], hmac: hmac)
    let c = LogIdentifiers(seed: [3], hmac: hmac)
    let drawsA = (0..<5).map { _ in a.token(byteCount: 24) }
    #expect(drawsA == (0..<5).map { _ in b.token(byteCount: 24) })
    #expect(drawsA != (0..<5).map { _ in c.token(byteCount: 24) })
    #expect(Set(drawsA).count == 5)
    #expect(a.token(byteCount: 40).count == 54)  // 40 bytes, unpadded base64url
  }
}

/// The invariants `Replica.apply` checks on every record, in release builds too: the
/// position moves by at most one and the log clock never moves back.
@Suite struct ReplicaInvariantTests {
  @Test func applyInvariantsAreNamed() {
    #expect(Replica.violation(before: (5, 1_000), after: (5, 1_000)) == nil)
    #expect(Replica.violation(before: (5, 1_000), after: (6, 1_500)) == nil)
    #expect(Replica.violation(before: (5, 1_000), after: (7, 1_500))?.hasPrefix("replica apply: the position") == true)
    #expect(Replica.violation(before: (5, 1_000), after: (4, 1_500))?.hasPrefix("replica apply: the position") == true)
    #expect(Replica.violation(before: (5, 1_000), after: (6, 999))?.hasPrefix("replica apply: the log clock") == true)
  }
}
