// CRC-32 (ISO-HDLC: the polynomial of zlib, gzip and PNG, reflected 0xEDB88320): the
// checksum of every frame of the relay's data files (docs/operating.md, "Data dir").
// Not a defence against tampering (whoever can write the data dir owns the relay),
// only against torn writes and flipped bits; the zlib variant so an operator can
// check a frame with any tool (`python3 -c 'import zlib; zlib.crc32(...)'`).

/// CRC-32 as zlib computes it.
public enum CRC32 {
  /// Slicing-by-8 (Kounavis and Berry, "A Systematic Approach to Building High
  /// Performance Software-Based CRC Generators", 2005): table k maps a byte to its
  /// remainder after k further zero bytes, so eight bytes cost eight lookups and no
  /// dependency chain through each one; table 0 is the classic byte-at-a-time table.
  static let tables: [UInt32] = {
    var t = [UInt32](repeating: 0, count: 8 * 256)
    for n in 0..<256 {
      var c = UInt32(n)
      for _ in 0..<8 { c = c & 1 == 1 ? 0xEDB8_8320 ^ (c >> 1) : c >> 1 }
      t[n] = c
    }
    for k in 1..<8 {
      for n in 0..<256 {
        let prev = t[(k - 1) * 256 + n]
        t[k * 256 + n] = t[Int(UInt8(truncatingIfNeeded: prev))] ^ (prev >> 8)
      }
    }
    return t
  }()

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
    tables.withUnsafeBufferPointer { t in
      var i = 0
      let n = bytes.count
      while n - i >= 8 {
        let lo = c ^ bytes.loadUnaligned(fromByteOffset: i, as: UInt32.self).littleEndian
        let hi = bytes.loadUnaligned(fromByteOffset: i + 4, as: UInt32.self).littleEndian
        c = t[7 * 256 + Int(lo & 0xff)] ^ t[6 * 256 + Int((lo >> 8) & 0xff)]
          ^ t[5 * 256 + Int((lo >> 16) & 0xff)] ^ t[4 * 256 + Int(lo >> 24)]
          ^ t[3 * 256 + Int(hi & 0xff)] ^ t[2 * 256 + Int((hi >> 8) & 0xff)]
          ^ t[1 * 256 + Int((hi >> 16) & 0xff)] ^ t[Int(hi >> 24)]
        i += 8
      }
      while i < n {
        c = t[Int(UInt8(truncatingIfNeeded: c) ^ bytes[i])] ^ (c >> 8)
        i += 1
      }
    }
    return ~c
  }
}
