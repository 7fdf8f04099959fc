// CRC-32 (ISO-HDLC: the polynomial of zlib, gzip and PNG, reflected 0xEDB88320): the
// checksum of every frame of the relay's data files (docs/operating.md, "Data dir").
// Not a defence against tampering (whoever can write the data dir owns the relay),
// only against torn writes and flipped bits; the zlib variant so an operator can
// check a frame with any tool (`python3 -c 'import zlib; zlib.crc32(...)'`).

/// CRC-32 as zlib computes it.
public enum CRC32 {
  static let table: [UInt32] = (0..<256).map { n -> UInt32 in
    var c = UInt32(n)
    for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
    return c
  }

  /// The checksum of `bytes`, continuing `crc` (0 to start).
  public static func checksum(_ bytes: some Sequence<UInt8>, continuing crc: UInt32 = 0) -> UInt32 {
    // One loop over raw bytes: a generic iterator here is not specialized across the
    // module boundary and costs a call per byte.
    if let sum = bytes.withContiguousStorageIfAvailable({ checksum(UnsafeRawBufferPointer($0), continuing: crc) }) {
      return sum
    }
    return Array(bytes).withUnsafeBytes { checksum($0, continuing: crc) }
  }

  public static func checksum(_ bytes: UnsafeRawBufferPointer, continuing crc: UInt32 = 0) -> UInt32 {
    var c = ~crc
    table.withUnsafeBufferPointer { t in
      for b in bytes { c = t[Int(UInt8(truncatingIfNeeded: c) ^ b)] ^ (c >> 8) }
    }
    return ~c
  }
}
