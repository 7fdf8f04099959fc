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
}
