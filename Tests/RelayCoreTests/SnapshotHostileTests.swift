// A snapshot is read from the shared store and distrusted like a log entry
// (docs/cluster.md; DESIGN.md "Limits and failures": input never traps): truncated,
// corrupted, random and hand-crafted inconsistent bytes are refused with an error.
import Foundation
import RelayProtocol
import Testing

@testable import RelayCore
import RelayPrimitives

/// A snapshot written section by section in SnapshotEncode.swift's layout; every
/// section defaults to the empty core's.
struct CraftedSnapshot {
  typealias Section = @Sendable (inout BinaryWriter) -> Void
  static let none: Section = { $0.count(0) }

  var version: UInt8 = RelayCore.snapshotVersion
  var profiles = none
  var connections = none
  var users = none
  var grants = none
  var sessions = none
  var budget: Section = { w in w.u64(0); w.count(0) }
  var liveness: Section = { w in w.u64(1); w.u64(1); w.count(0); w.count(0); w.count(0) }
  var calls: Section = { w in
    for _ in 0..<4 { w.count(0) }  // calls, live lists, initiate windows, ring windows
    w.u64(0); w.count(0); w.count(0); w.i64(0); w.i64(0); w.i64(0); w.u64(0)  // stats
    w.u64(0); w.count(0)  // finished
  }
  var counters: Section = { w in
    for _ in 0..<3 { w.i64(0) }
    w.count(0); w.count(0); w.u64(0); w.count(0)
    for _ in 0..<3 { w.u64(0) }
    w.i64(0); w.u64(0)
  }
  var deadlines: Section = { w in w.u64(0); w.count(0) }
  var push: Section = { w in w.count(0); w.count(0) }  // registrations, job counters

  var bytes: [UInt8] {
    var w = BinaryWriter()
    w.u8(version)
    for section in [profiles, connections, users, grants, sessions, budget, liveness, calls, counters, deadlines, push] {
      section(&w)
    }
    return w.bytes
  }

  /// A dev profile: uid, name = uid, no avatar, any session, token "tok-uid".
  static func profile(_ w: inout BinaryWriter, _ uid: String) {
    w.string(uid); w.string(uid); w.bool(false); w.u8(0); w.string("tok-\(uid)"); w.u8(1)
  }

  /// One session "s" at seq 0 with the given members (profile index, connection) and
  /// hands, no rate windows, an empty churn window, an empty replay log.
  static func session(members: [(UInt32, UInt64?)], hands: [String] = []) -> Section {
    { w in
      w.count(1)
      w.string("s"); w.i64(0)
      w.count(members.count)
      for (p, c) in members {
        w.u32(p); w.i64(5); w.optional(c) { $0.u64($1) }
      }
      w.count(hands.count)
      for uid in hands { w.string(uid); w.string(uid); w.i64(9) }
      w.count(0)
      w.count(0); w.u32(0)  // the session's churn window, empty
      w.i64(0); w.count(0)
    }
  }

  /// Profiles "a" and "b", and session "s" with both as lost members.
  static var twoLostMembers: CraftedSnapshot {
    var s = CraftedSnapshot()
    s.profiles = { w in w.count(2); profile(&w, "a"); profile(&w, "b") }
    s.sessions = session(members: [(0, nil), (1, nil)])
    return s
  }
}

@Suite struct SnapshotHostileTests {
  static let config = CoreConfig(devMode: true, serverVersion: "hostile")

  static func restore(_ bytes: [UInt8], config: CoreConfig = config) throws -> RelayCore {
    try RelayCore(restoring: bytes, config: config, ids: SeededIDs(), verifyToken: { _, _ in nil })
  }

  static func refused(_ bytes: [UInt8], config: CoreConfig = config) -> Bool {
    (try? restore(bytes, config: config)) == nil
  }

  /// Why the restore refused, or nil if it did not.
  static func reason(_ bytes: [UInt8], config: CoreConfig = config) -> String? {
    do {
      _ = try RelayCore(restoring: bytes, config: config, ids: SeededIDs(), verifyToken: { _, _ in nil })
      return nil
    } catch {
      return error.reason
    }
  }

  /// A snapshot of a busy state: sessions, lost members, calls, deadlines.
  static func realSnapshot() -> (bytes: [UInt8], config: CoreConfig) {
    let sim = TwinSim(seed: 11)
    sim.run(steps: 220, restoreAt: 1_000)
    return (sim.primary.snapshot(), sim.config)
  }

  @Test func craftedEmptySnapshotIsTheEmptyCoresAndRestores() throws {
    let empty = RelayCore(config: Self.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
    #expect(CraftedSnapshot().bytes == empty.snapshot())
    _ = try Self.restore(CraftedSnapshot().bytes)
    _ = try Self.restore(CraftedSnapshot.twoLostMembers.bytes)
  }

  /// Without the canonical-encoding check (a data dir's own snapshot) the same state
  /// restores, a non-canonical encoding of a valid state is accepted, and every other
  /// check still refuses what it refuses.
  @Test func withoutTheCanonicalCheckOnlyThatCheckIsSkipped() throws {
    func lenient(_ bytes: [UInt8], _ config: CoreConfig = Self.config) throws -> RelayCore {
      try RelayCore(restoring: bytes, config: config, ids: SeededIDs(), verifyToken: { _, _ in nil }, canonical: false)
    }
    let (bytes, config) = Self.realSnapshot()
    #expect(try lenient(bytes, config).snapshot() == bytes)
    var s = CraftedSnapshot.twoLostMembers
    s.sessions = CraftedSnapshot.session(members: [(1, nil), (0, nil)])
    #expect(Self.refused(s.bytes))
    let reordered = try lenient(s.bytes)
    #expect(reordered.snapshot() != s.bytes)
    s.sessions = CraftedSnapshot.session(members: [(0, nil), (0, nil)])
    #expect((try? lenient(s.bytes)) == nil, "duplicate uid in a session")
    #expect((try? lenient(Array(bytes.dropLast()), config)) == nil, "truncated")
  }

  @Test func everyTruncationIsRefused() {
    let (bytes, config) = Self.realSnapshot()
    #expect(bytes.count > 2_000)
    var accepted: [Int] = []
    for n in 0..<bytes.count where !Self.refused(Array(bytes[..<n]), config: config) { accepted.append(n) }
    #expect(accepted.isEmpty)
    #expect(Self.refused(bytes + [0], config: config), "trailing bytes")
  }

  /// Flipped bytes are refused, or give a state whose own snapshot is exactly those
  /// bytes (a flipped time or name is a valid state too); either way the core then
  /// runs without trapping.
  @Test func flippedBytesAreRefusedOrRestoreExactly() {
    let (bytes, config) = Self.realSnapshot()
    var rng = SeededRandom(seed: 99)
    var accepted = 0
    for _ in 0..<3_000 {
      var mutated = bytes
      for _ in 0..<(1 + rng.below(3)) { mutated[rng.below(mutated.count)] ^= UInt8(1 + rng.below(255)) }
      guard let core = try? Self.restore(mutated, config: config) else { continue }
      accepted += 1
      #expect(core.snapshot() == mutated)
      Self.exercise(core)
    }
    print("flipped snapshots accepted as other valid states: \(accepted) of 3000")
  }

  /// Inputs that touch every table: far-future ticks fire every deadline, closes end
  /// every connection, a newcomer joins a session.
  static func exercise(_ core: RelayCore) {
    let at = Instant(monoMs: 1 << 52, wallMs: 1 << 52)
    core.tick(at: at)
    for c in core.connections.values.map(\.id).sorted() { core.closed(c, clean: false, at: at) }
    core.open(ConnectionID(1 << 50), at: at)
    core.receive(ConnectionID(1 << 50), text: Array(#"{"type":"hello","dev":{"uid":"a","name":"A"}}"#.utf8), at: at)
    core.receive(ConnectionID(1 << 50), text: Array(#"{"type":"session.join","session":"s0"}"#.utf8), at: at)
    core.tick(at: Instant(monoMs: (1 << 52) + 1_000_000, wallMs: 1 << 52))
    _ = core.takeEffects()
  }

  @Test func randomBytesAreRefused() {
    var rng = SeededRandom(seed: 7)
    for _ in 0..<3_000 {
      var bytes = (0..<rng.below(300)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
      if !bytes.isEmpty && rng.chance(50) { bytes[0] = RelayCore.snapshotVersion }
      #expect(Self.refused(bytes))
    }
  }

  @Test func unknownVersionAndForgedCountsAreRefused() {
    var s = CraftedSnapshot()
    s.version = RelayCore.snapshotVersion + 1
    #expect(Self.reason(s.bytes)?.contains("unknown snapshot version") == true)
    s = CraftedSnapshot()
    s.profiles = { $0.u32(UInt32.max) }  // four billion profiles in a few bytes
    #expect(Self.reason(s.bytes)?.contains("exceeds") == true)
    s = CraftedSnapshot()
    s.sessions = { $0.u32(1 << 20) }
    #expect(Self.reason(s.bytes)?.contains("exceeds") == true)
  }

  @Test func inconsistentReferencesAreRefused() {
    var s = CraftedSnapshot.twoLostMembers
    s.sessions = CraftedSnapshot.session(members: [(0, nil), (0, nil)])
    #expect(Self.reason(s.bytes)?.contains("twice in session") == true, "duplicate uid in a session")
    s.sessions = CraftedSnapshot.session(members: [(0, 5), (1, nil)])
    #expect(Self.reason(s.bytes)?.contains("not a connection of that user") == true, "participant on an unknown connection")
    s.sessions = CraftedSnapshot.session(members: [(0, nil), (2, nil)])
    #expect(Self.reason(s.bytes)?.contains("unknown profile") == true, "unknown profile")
    s.sessions = CraftedSnapshot.session(members: [(0, nil), (1, nil)], hands: ["c"])
    #expect(Self.reason(s.bytes)?.contains("not a member") == true, "hand of a non-member")
    s.sessions = CraftedSnapshot.session(members: [(0, nil), (1, nil)], hands: ["a", "a"])
    #expect(Self.reason(s.bytes)?.contains("raised twice") == true, "hand raised twice")
    s.sessions = CraftedSnapshot.session(members: [(1, nil), (0, nil)])
    #expect(Self.reason(s.bytes)?.contains("canonical") == true, "profiles out of first-use order: not canonical")
    s = CraftedSnapshot.twoLostMembers
    s.deadlines = { w in w.u64(5); w.count(1); w.i64(100); w.u64(0); w.u8(2); w.u64(7) }
    #expect(Self.reason(s.bytes)?.contains("nothing that wants it") == true, "grace of an unknown record")
    s.deadlines = { w in w.u64(5); w.count(1); w.i64(100); w.u64(0); w.u8(5); w.string("nocall") }
    #expect(Self.reason(s.bytes)?.contains("nothing that wants it") == true, "ring of an unknown call")
    s.deadlines = { w in w.u64(5); w.count(1); w.i64(100); w.u64(0); w.u8(0); w.u64(3) }
    #expect(Self.reason(s.bytes)?.contains("nothing that wants it") == true, "hello timeout of an unknown connection")
    // Kind 1 was a §5 heartbeat check: heartbeats are node-local, never in a snapshot.
    s.deadlines = { w in w.u64(5); w.count(1); w.i64(100); w.u64(0); w.u8(1); w.u64(3); w.i64(100) }
    #expect(Self.reason(s.bytes)?.contains("heartbeats are node-local") == true, "a heartbeat deadline")
    s = CraftedSnapshot.twoLostMembers
    s.liveness = { w in w.u64(1); w.u64(1); w.count(0); w.count(1); w.string("s"); w.string("a"); w.u64(3); w.count(0) }
    #expect(Self.reason(s.bytes)?.contains("unknown record") == true, "lost owner naming an unknown record")
    s = CraftedSnapshot()
    s.connections = { w in
      w.count(1); w.u64(UInt64.max); w.bool(false); w.count(0); w.i64(0); w.u8(0)
      w.bool(false); w.bool(false); w.bool(false); w.u32(0); w.count(0); w.u32(0)
    }
    #expect(Self.reason(s.bytes)?.contains("reserved") == true, "reserved connection id")
  }

  /// §9a registrations: what the registry code assumes unique, and tokens and device
  /// ids `push.register` could never have stored.
  @Test func inconsistentPushRegistrationsAreRefused() {
    func registry(_ devices: [(String, [(String, String, String)])]) -> CraftedSnapshot.Section {
      { w in
        w.count(1); w.string("a"); w.count(devices.count)
        for (device, tokens) in devices {
          w.string(device); w.count(tokens.count)
          for (kind, token, environment) in tokens { w.string(kind); w.string(token); w.string(environment) }
        }
        w.count(0)
      }
    }
    let hex = String(repeating: "ab", count: 32)
    var s = CraftedSnapshot()
    s.push = registry([("p", [("fcm", "t", "production")])])
    #expect(Self.reason(s.bytes) == nil, "a well-formed registration restores")
    s.push = registry([("p", [("fcm", "t", "production")]), ("p", [("fcm", "u", "production")])])
    #expect(Self.reason(s.bytes)?.contains("push device of a user") == true)
    s.push = registry([("p", [("fcm", "t", "production")]), ("q", [("fcm", "t", "production")])])
    #expect(Self.reason(s.bytes)?.contains("push token of a user") == true)
    s.push = registry([("p", [("fcm", "t", "production"), ("apns", hex, "production")])])
    #expect(Self.reason(s.bytes)?.contains("out of order") == true, "kinds out of order")
    s.push = registry([("p", [])])
    #expect(Self.reason(s.bytes)?.contains("without tokens") == true)
    s.push = registry([("p", [("apns", hex.uppercased(), "production")])])
    #expect(Self.reason(s.bytes)?.contains("not a push token") == true, "APNs hex not canonical")
    s.push = registry([("p", [("fcm", "t", "sandbox")])])
    #expect(Self.reason(s.bytes)?.contains("not a push token") == true, "sandbox FCM")
    s.push = registry([("p q", [("fcm", "t", "production")])])
    #expect(Self.reason(s.bytes)?.contains("not a device id") == true)
    s.push = { w in
      w.count(2)
      for uid in ["a", "b"] {
        w.string(uid); w.count(1); w.string("p"); w.count(1); w.string("fcm"); w.string("t"); w.string("production")
      }
      w.count(0)
    }
    #expect(Self.reason(s.bytes)?.contains("push token of two users") == true)
  }

  /// States the core never reaches, made by reaching into a real one: its snapshot
  /// is refused.
  @Test func inconsistentStatesAreRefused() {
    let h = Harness()
    h.join(1, uid: "a", session: "s")
    h.join(2, uid: "b", session: "s")
    let config = h.core.config
    // Written afresh: reaching into the tables bypasses what tells the capture caches
    // of a change (SnapshotCache.swift).
    func fresh() -> [UInt8] { h.core.snapshotParts(reusing: false).joined() }
    func why() -> String { Self.reason(fresh(), config: config) ?? "accepted" }
    #expect(!Self.refused(fresh(), config: config))
    let b = h.core.connections[ConnectionID(2)]!
    h.core.userConnections.remove(b)
    #expect(why().contains("missing from their user"), "connection missing from its user's list")
    h.core.userConnections.append(b)
    h.core.sessions["s"]!.seq += 1
    #expect(why().contains("do not end at its seq"), "replay log not ending at the session's seq")
    h.core.sessions["s"]!.seq -= 1
    h.core.sessions["s"]!.hands.append(Hand(uid: "zed", name: "Z", raisedAtWallMs: 1))
    #expect(why().contains("not a member"), "hand of a non-member")
    h.core.sessions["s"]!.hands.removeAll()
    let ghost = Call(
      id: "ghost", sessionId: "g", caller: CallCaller(uid: "a", name: "A", avatar: nil),
      callerConnection: ConnectionID(1), to: ["b"], callType: .audio, metadata: nil, createdAtWallMs: 0,
      expiresAtWallMs: 0, ringDeadlineMonoMs: 0)
    h.core.calls.live["a"] = [ghost]
    #expect(why().contains("unknown call"), "live list naming an unknown call")
    h.core.calls.live["a"] = nil
    #expect(!Self.refused(fresh(), config: config))
  }
}

extension SnapshotHostileTests {
  /// Writes the seed corpus of the FuzzSnapshot target when RELAY_WRITE_SNAPSHOT_SEEDS
  /// names a directory (`Fuzz/corpus/FuzzSnapshot`); otherwise does nothing.
  @Test func writeFuzzSeeds() throws {
    guard let dir = LivenessSimulationTests.environment(string: "RELAY_WRITE_SNAPSHOT_SEEDS") else { return }
    var seeds = [CraftedSnapshot().bytes, CraftedSnapshot.twoLostMembers.bytes]
    for (seed, steps) in [(1, 40), (2, 80), (3, 120), (11, 220)] as [(UInt64, Int)] {
      let sim = TwinSim(seed: seed)
      sim.run(steps: steps, restoreAt: 1_000)
      seeds.append(sim.primary.snapshot())
    }
    let h = Harness()
    h.join(1, uid: "a", session: "s")
    seeds.append(h.core.snapshot())  // one small session
    let push = PushHarness()
    push.registerBobAndKill()
    _ = push.call()
    seeds.append(push.h.core.snapshot())  // §9a registrations, a pushed callee mid-ring
    for (i, bytes) in seeds.enumerated() {
      try Data(bytes).write(to: URL(fileURLWithPath: dir).appendingPathComponent("seed-\(i)"))
    }
  }
}
