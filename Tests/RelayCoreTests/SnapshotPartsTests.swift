// SnapshotParts (SnapshotParts.swift): a snapshot taken with its replay payloads by
// reference joins to exactly the bytes one sequential writer produces, so taking it
// on the loop and joining it elsewhere changes nothing of the format.
import Testing

@testable import RelayCore

@Suite struct SnapshotPartsTests {
  /// Strings on both sides of the splice threshold, in any order, and an empty one.
  @Test func splicedStringsJoinToTheSequentialWritersBytes() {
    let strings: [[UInt8]] = [
      [], [1, 2, 3], Array(repeating: 7, count: BinaryWriter.spliceThreshold),
      Array(repeating: 9, count: BinaryWriter.spliceThreshold - 1), Array(0..<200), [4],
      Array(repeating: 5, count: 1_000), Array(repeating: 6, count: 70),
    ]
    var sequential = BinaryWriter()
    var split = BinaryWriter()
    var spliced: [(at: Int, bytes: [UInt8])] = []
    for (i, s) in strings.enumerated() {
      sequential.u32(UInt32(i))
      split.u32(UInt32(i))
      sequential.bytes(s)
      split.bytes(s, splicingInto: &spliced)
    }
    sequential.u8(0xEE)
    split.u8(0xEE)
    let parts = SnapshotParts(written: split.bytes, spliced: spliced)
    #expect(spliced.count == 4, "the strings of 64 bytes or more are spliced, the others copied")
    #expect(parts.count == sequential.bytes.count)
    #expect(parts.joined() == sequential.bytes)
    let header: [UInt8] = [0xAA, 0xBB, 0xCC]
    #expect(parts.prefixed(with: header).joined() == header + sequential.bytes)
    #expect(parts.prefixed(with: header).count == header.count + sequential.bytes.count)
    #expect(SnapshotParts(written: [1, 2]).joined() == [1, 2])
  }

  /// A core whose replay holds messages: the written part holds none of their bytes
  /// (the loop's cost is the skeleton), and the joined bytes restore.
  @Test func aCoresReplayPayloadsAreKeptByReference() throws {
    let h = Harness()
    h.join(1, uid: "alice")
    let filler = String(repeating: "x", count: 1_000)
    for i in 0..<12 {
      h.send(1, #"{"type":"message.send","session":"s","data":{"i":\#(i),"f":"\#(filler)"}}"#)
      h.advance(1_000)  // within the message rate (§7)
    }
    _ = h.out()
    let parts = h.core.snapshotParts()
    #expect(parts.spliced.count >= 12)
    #expect(parts.written.count < 2 * 1_000, "payload bytes were copied into the written part")
    #expect(parts.count > 12 * 1_000)
    let bytes = parts.joined()
    #expect(bytes == h.core.snapshot())
    let restored = try RelayCore(restoring: bytes, config: h.core.config, ids: SeededIDs(), verifyToken: { _, _ in nil })
    #expect(restored.snapshot() == bytes)
  }
}
