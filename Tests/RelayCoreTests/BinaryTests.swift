// BinaryWriter / BinaryReader (Binary.swift): little-endian fixed widths, length
// prefixes, and a reader that refuses short, oversized or malformed input.
import Testing

@testable import RelayCore

@Suite struct BinaryTests {
  @Test func valuesRoundTripLittleEndian() throws {
    var w = BinaryWriter()
    w.u8(7)
    w.bool(true)
    w.u32(0x0102_0304)
    w.u64(0x0102_0304_0506_0708)
    w.i64(-2)
    w.string("héllo")
    w.bytes([9, 8])
    w.optional(nil as Int64?) { $0.i64($1) }
    w.optional(5 as Int64?) { $0.i64($1) }
    #expect(Array(w.bytes[2..<6]) == [4, 3, 2, 1])
    var r = BinaryReader(w.bytes)
    #expect(try r.u8() == 7)
    #expect(try r.bool())
    #expect(try r.u32() == 0x0102_0304)
    #expect(try r.u64() == 0x0102_0304_0506_0708)
    #expect(try r.i64() == -2)
    #expect(try r.string() == "héllo")
    #expect(try r.bytes() == [9, 8])
    #expect(try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.i64() } == nil)
    #expect(try r.optional { (r: inout BinaryReader) throws(BinaryError) in try r.i64() } == 5)
    try r.expectEnd()
  }

  @Test func shortInputIsRefusedAtEveryWidth() {
    var w = BinaryWriter()
    w.u64(1)
    for n in 0..<8 {
      var r = BinaryReader(Array(w.bytes[..<n]))
      #expect(throws: BinaryError.self) { try r.u64() }
      var r32 = BinaryReader(Array(w.bytes[..<min(n, 3)]))
      #expect(throws: BinaryError.self) { try r32.u32() }
    }
    var empty = BinaryReader([])
    #expect(throws: BinaryError.self) { try empty.u8() }
  }

  @Test func lengthsAndCountsBeyondTheInputAreRefused() throws {
    var r = BinaryReader([0xFF, 0xFF, 0xFF, 0xFF, 1, 2])
    #expect(throws: BinaryError.self) { try r.bytes() }
    // Three elements of at least 4 bytes cannot fit in 8.
    var c = BinaryReader([3, 0, 0, 0] + [UInt8](repeating: 0, count: 8))
    #expect(throws: BinaryError.self) { try c.count(minBytes: 4) }
    var ok = BinaryReader([2, 0, 0, 0] + [UInt8](repeating: 0, count: 8))
    #expect(try ok.count(minBytes: 4) == 2)
  }

  @Test func malformedValuesAreRefused() {
    var bool = BinaryReader([2])
    #expect(throws: BinaryError.self) { try bool.bool() }
    var utf8 = BinaryReader([2, 0, 0, 0, 0xC3, 0x28])  // an invalid two-byte sequence
    #expect(throws: BinaryError.self) { try utf8.string() }
    let trailing = BinaryReader([0])
    #expect(throws: BinaryError.self) { try trailing.expectEnd() }
  }
}
