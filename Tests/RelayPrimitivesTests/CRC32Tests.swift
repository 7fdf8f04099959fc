import Testing

@testable import RelayPrimitives

@Suite struct CRC32Tests {
  /// The check value of CRC-32/ISO-HDLC (zlib's `crc32`) and zlib's results.
  @Test func matchesZlib() {
    #expect(CRC32.checksum(Array("123456789".utf8)) == 0xCBF4_3926)
    #expect(CRC32.checksum([UInt8]()) == 0)
    #expect(CRC32.checksum(Array("relay".utf8)) == 0x5D3A_E2B9)
  }

  @Test func continuesAcrossPieces() {
    let whole = Array("hello, data dir".utf8)
    #expect(CRC32.checksum(whole[7...], continuing: CRC32.checksum(whole[..<7])) == CRC32.checksum(whole))
  }

  /// Eight bytes at a time (the sliced tables) agree with the bit-by-bit definition at
  /// every length and starting offset, unaligned ones and short tails included.
  @Test func slicedTablesAgreeWithTheDefinition() {
    func bitwise(_ bytes: ArraySlice<UInt8>) -> UInt32 {
      var c: UInt32 = 0xFFFF_FFFF
      for b in bytes {
        c ^= UInt32(b)
        for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
      }
      return ~c
    }
    let bytes = (0..<80).map { UInt8(truncatingIfNeeded: $0 &* 37 &+ 11) }
    for start in 0..<9 {
      for end in start...bytes.count {
        #expect(CRC32.checksum(bytes[start..<end]) == bitwise(bytes[start..<end]))
      }
    }
    let ramp = (0...255).map { UInt8($0) }
    #expect(CRC32.checksum(ramp + ramp + ramp) == 0xB0C0_DF2A)  // zlib.crc32(bytes(range(256)) * 3)
    #expect(CRC32.checksum(Array("The quick brown fox jumps over the lazy dog".utf8)) == 0x414F_A339)
  }
}
