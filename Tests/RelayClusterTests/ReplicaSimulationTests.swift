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
    let core = RelayCore(
      config: config, ids: LogIdentifiers(seed: seed) { Crypto.hmacSHA256(key: $0, message: $1) },
      verifyToken: { _, _ in nil })
    replica = Replica(core: core, localNode: number, nodeTimeoutMs: timeoutMs)
  }

  func catchUp(_ log: [LogEntry], to end: Int) {
    while cursor < min(end, log.count) {
      let applied = replica.apply(log[cursor])
      fingerprints.append(fingerprint(applied))
      cursor += 1
    }
  }
}

private func fingerprint(_ applied: Applied) -> String {
  var s = "d\(applied.deaths)"
  for e in applied.effects {
    switch e {
    case .send(let p, let to): s += "|s\(to.map(\.raw)):" + String(decoding: p.bytes, as: UTF8.self)
    case .ping(let c): s += "|p\(c.raw)"
    case .close(let c, let code, _): s += "|c\(c.raw):\(code)"
    case .drop(let c): s += "|x\(c.raw)"
    case .webhook(let ev, let body): s += "|w\(ev):" + String(decoding: body.bytes, as: UTF8.self)
    }
  }
  if let (r, result) = applied.admin { s += "|a\(r):\(result)" }
  return s
}

private struct World {
  var rng: SeededRandom
  var nowMs: Int64 = 1_800_000_000_000
  var log: [LogEntry] = []
  var nodes: [SimNode] = []
  let config: CoreConfig
  let seed: [UInt8]
  let timeoutMs: Int64 = 2_000

  init(seed: UInt64) {
    rng = SeededRandom(seed: seed)
    var c = CoreConfig(devMode: true, serverVersion: "sim")
    c.heartbeatsInShell = true
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
      log.append(LogEntry(node: UInt32(n), wallMs: nowMs, input: .join(name: "n\(n)")))
    }
  }

  mutating func append(_ node: SimNode, _ input: LogInput) {
    // A paused node writes late: its entries land after its death was declared.
    log.append(LogEntry(node: node.number, wallMs: nowMs, input: input))
  }

  mutating func text(_ node: SimNode, _ c: UInt64, _ json: String) {
    append(node, .text(connection: c, Array(json.utf8)))
  }

  mutating func step() {
    let node = nodes[rng.below(nodes.count)]
    let paused = nowMs < node.pausedUntilMs
    let uid = "u\(rng.below(5))"
    let session = "s\(rng.below(2))"
    switch rng.below(14) {
    case 0, 1:
      let c = Replica.connectionID(node: node.number, local: node.nextLocal).raw
      node.nextLocal += 1
      node.open.append(c)
      append(node, .open(connection: c))
      text(node, c, #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid)"}}"#)
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
  func replicasAgreeOnEveryEntry(seed: UInt64) {
    var world = World(seed: seed)
    for _ in 0..<400 { world.step() }
    // A node that joins late replays the whole log and must reach the same state.
    let late = SimNode(number: 99, seed: world.seed, config: world.config, timeoutMs: world.timeoutMs)
    world.nodes.append(late)
    for n in world.nodes { n.catchUp(world.log, to: world.log.count) }
    let reference = world.nodes[0]
    for n in world.nodes.dropFirst() {
      #expect(n.fingerprints == reference.fingerprints, "seed \(seed): node \(n.number) diverged")
      #expect(n.replica.retired == reference.replica.retired)
      for s in ["s0", "s1"] {
        #expect(n.replica.core.sessionInfo(s) == reference.replica.core.sessionInfo(s), "seed \(seed) \(s)")
      }
    }
  }

  @Test func deadNodesConnectionsEndAsLostAndItsLaterEntriesAreIgnored() {
    var config = CoreConfig(devMode: true, serverVersion: "t")
    config.heartbeatsInShell = true
    let core = RelayCore(config: config, ids: LogIdentifiers(seed: [1]) { Crypto.hmacSHA256(key: $0, message: $1) },
      verifyToken: { _, _ in nil })
    let r = Replica(core: core, localNode: 1, nodeTimeoutMs: 1_000)
    var t: Int64 = 10_000
    func apply(_ node: UInt32, _ input: LogInput) -> Applied {
      r.apply(LogEntry(node: node, wallMs: t, input: input))
    }
    _ = apply(1, .join(name: "a"))
    _ = apply(2, .join(name: "b"))
    let a = Replica.connectionID(node: 1, local: 1).raw
    let b = Replica.connectionID(node: 2, local: 1).raw
    for (n, c, uid) in [(UInt32(1), a, "alice"), (2, b, "bob")] {
      _ = apply(n, .open(connection: c))
      _ = apply(n, .text(connection: c, Array(#"{"type":"hello","dev":{"uid":"\#(uid)","name":"x"}}"#.utf8)))
      _ = apply(n, .text(connection: c, Array(#"{"type":"session.join","session":"s"}"#.utf8)))
    }
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
    // Node 2 wakes and writes with its old identity: nothing happens.
    let late = apply(2, .text(connection: b, Array(#"{"type":"hand.raise","session":"s"}"#.utf8)))
    #expect(late.effects.isEmpty)
    // A silence of the whole log is nobody's death.
    t += 5_000
    #expect(apply(1, .beat).deaths.isEmpty)
  }

  @Test func entriesRoundTripAndForeignBytesAreRefused() {
    let entries: [LogEntry] = [
      .init(node: 1, wallMs: 5, input: .join(name: "n-1")),
      .init(node: 7, wallMs: -1, input: .leave),
      .init(node: 2, wallMs: 1 << 40, input: .beat),
      .init(node: 2, wallMs: 3, input: .tick),
      .init(node: 3, wallMs: 4, input: .open(connection: 1 << 41 | 9)),
      .init(node: 3, wallMs: 4, input: .text(connection: 12, [0, 1, 2, 255])),
      .init(node: 3, wallMs: 4, input: .closed(connection: 12, clean: true)),
      .init(node: 4, wallMs: 4, input: .admin(request: 77, .createSession)),
      .init(node: 4, wallMs: 4, input: .admin(request: 78, .removeParticipant(session: "s", uid: "ü"))),
      .init(node: 4, wallMs: 4, input: .admin(request: 79, .call(.reject(.busy), callId: "c", token: "t.t.t"))),
      .init(node: 4, wallMs: 4, input: .admin(request: 80, .sessionInfo(session: "s"))),
      .init(node: 4, wallMs: 4, input: .admin(request: 81, .callInfo(callId: "c", token: "t"))),
    ]
    for e in entries {
      let bytes = e.encoded()
      #expect(LogEntry(decoding: bytes) == e)
      #expect(LogEntry(decoding: bytes + [0]) == nil)
      #expect(LogEntry(decoding: Array(bytes.dropLast())) == nil)
    }
    #expect(LogEntry(decoding: []) == nil)
    let batch = LogEntry.encodeBatch(entries)
    #expect(LogEntry.decodeBatch(batch) == entries)
    #expect(LogEntry.decodeBatch(batch + [1]) == nil)
    #expect(LogEntry.decodeBatch([]) == nil)
    #expect(LogEntry(decoding: [99, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0]) == nil)
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
