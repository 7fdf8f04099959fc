// SnapshotParts (SnapshotParts.swift): a snapshot taken now and written later is the
// state as it was when it was taken, whatever the core does in between, and its bytes
// are those of the format the reader knows.
import RelayPrimitives
import Testing

@testable import RelayCore

@Suite struct SnapshotPartsTests {
  /// A core with several sessions whose replay logs span many chunks, hold
  /// `participant.joined` entries of profiles nothing else refers to any more (the
  /// user left), and are bounded by the process-wide budget (eviction records of
  /// several sessions interleaved, some stale).
  static func busyCore() -> Harness {
    let h = Harness {
      $0.messageRate = 1_000_000
      $0.replayBudgetBytes = 30_000
      $0.replayEvents = 25
    }
    h.join(1, uid: "alice", session: "s0")
    h.join(2, uid: "bob", session: "s1")
    h.join(3, uid: "carol", session: "s2")
    h.join(4, uid: "dave", session: "s1")
    h.core.closed(ConnectionID(4), clean: true, at: h.now)  // dave left: his profile is only in s1's replay
    _ = h.out()
    round(h, 0)
    return h
  }

  /// Messages of various sizes into every session, and a short-lived member.
  static func round(_ h: Harness, _ r: Int) {
    for i in 0..<90 {
      let n = UInt64(1 + (i + r) % 3)
      let pad = String(repeating: "x", count: 100 + (i * 37 + r * 11) % 900)
      h.send(n, #"{"type":"message.send","session":"s\#(n - 1)","data":{"r":\#(r),"i":\#(i),"p":"\#(pad)"}}"#)
      h.advance(3)
      if i == 80 {
        h.join(UInt64(10 + r), uid: "guest\(r)", session: "s2")
        h.core.closed(ConnectionID(UInt64(10 + r)), clean: true, at: h.now)
      }
    }
    _ = h.out()
  }

  static func restore(_ bytes: [UInt8], _ h: Harness) throws -> RelayCore {
    try RelayCore(restoring: bytes, config: h.core.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
  }

  /// Snapshot of state S, the core goes on (appends, drops from the front, budget
  /// evictions, sessions freed and created), snapshot of state T: each joins, at any
  /// time later, to the bytes of its own state, and restores to it.
  @Test func aCaptureIsTheStateWhenItWasTaken() throws {
    let h = Self.busyCore()
    #expect(h.core.stats.replayEvictions > 0, "the budget never evicted: the test proves less")
    let s = h.core.snapshotParts()
    let sNow = h.core.snapshot()
    var table = BinaryReader(sNow)
    _ = try table.u8()
    let live = Set(
      h.core.connections.values.compactMap { $0.profile.map(ObjectIdentifier.init) }
        + h.core.sessions.values.flatMap { $0.members.map { ObjectIdentifier($0.profile) } })
    #expect(try table.u32() > UInt32(live.count), "no profile only in a replay log: the test proves less")
    for r in 1...3 { Self.round(h, r) }
    h.core.closed(ConnectionID(3), clean: true, at: h.now)  // s2 is freed
    h.join(20, uid: "erin", session: "s3")
    Self.round(h, 4)
    let t = h.core.snapshotParts()
    let tNow = h.core.snapshot()
    #expect(sNow != tNow)
    Self.round(h, 5)
    #expect(s.joined() == sNow)
    #expect(t.joined() == tNow)
    let restored = try Self.restore(s.joined(), h)
    #expect(restored.snapshot() == sNow)
    #expect(try Self.restore(tNow, h).snapshot() == tNow)
  }

  /// The bytes are those the sequential writer wrote before snapshots were captured
  /// in parts (same layout, same profile numbering, same eviction records): a
  /// checksum of that writer's bytes for `busyCore()`.
  @Test func theLayoutIsTheSequentialWriters() {
    let bytes = Self.busyCore().core.snapshot()
    #expect(bytes.count == 30_973)
    #expect(CRC32.checksum(bytes) == 0xD032_27BC)
  }

  /// `framed(by:)`: the header, the snapshot's length as a u32, then the snapshot.
  @Test func framedPartsCarryTheirLength() throws {
    let h = Self.busyCore()
    let header: [UInt8] = [0xAA, 0xBB, 0xCC]
    let framed = h.core.snapshotParts().framed(by: header).joined()
    let bytes = h.core.snapshot()
    var r = BinaryReader(framed)
    #expect([try r.u8(), try r.u8(), try r.u8()] == header)
    #expect(try r.bytes() == bytes)
    try r.expectEnd()
  }

  /// `joined(pieceBytes:)`: every piece but the last exactly that long, and the pieces
  /// in order are the joined bytes, whatever the size (pieces cut inside the profile
  /// table, a replay event, the eviction records, the skeleton; the framed length
  /// patched into a piece already cut, with a header of one byte or several).
  @Test func piecesAreTheJoinedBytesCut() {
    let h = Self.busyCore()
    for header in [[], [0xAA], [0xAA, 0xBB, 0xCC]] as [[UInt8]] {
      let parts = header.isEmpty ? h.core.snapshotParts() : h.core.snapshotParts().framed(by: header)
      let whole = parts.joined()
      for size in [1, 2, 3, 5, 7, 64, 1_000, 4_096, whole.count - 1, whole.count, whole.count + 1] {
        let pieces = parts.joined(pieceBytes: size)
        #expect(pieces.dropLast().allSatisfy { $0.count == size }, "piece size \(size)")
        #expect(pieces.last.map { $0.count >= 1 && $0.count <= size } == true, "last piece, size \(size)")
        #expect(Array(pieces.joined()) == whole, "pieces of \(size), header \(header.count)")
      }
    }
  }

  /// The users' connections are captured in one pass over the multimap and grouped
  /// off the loop: the same lists, in the same order, as a lookup per user gives
  /// (the table's probe runs wrap past its end at some sizes: every size is checked),
  /// also after some connections closed.
  @Test func userConnectionsAreGroupedAsLookedUp() {
    let h = Harness()
    func check(_ label: String) {
      let table = h.core.userConnections
      let uids = Set(h.core.connections.values.compactMap(\.uid)).sorted()
      let expected = uids.map { uid in (uid, table.elements(withKey: uid).map(\.id.raw)) }
      let grouped = UserConnections(table).grouped()
      #expect(grouped.map(\.uid) == expected.map(\.0), "\(label)")
      #expect(grouped.map(\.ids) == expected.map(\.1), "\(label)")
    }
    for n in 1...300 {
      h.connect(UInt64(n), uid: "u\((n * 7) % 97)")
      check("\(n) connections")
    }
    for n in stride(from: 3, through: 300, by: 5) { h.core.closed(ConnectionID(UInt64(n)), clean: true, at: h.now) }
    check("after closes")
  }
}
