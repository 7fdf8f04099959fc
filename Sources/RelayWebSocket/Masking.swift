// Payload masking (RFC 6455 §5.3): octet i of the payload is XORed with octet
// (i mod 4) of the 4-octet masking key. Masking and unmasking are the same
// operation. This file does it eight octets at a time.

/// A masking key held as the four octets in wire order, loaded into a
/// `UInt32` in *memory* order, so that XOR against a memory load of payload
/// bytes is correct on either endianness.
@usableFromInline
struct MaskKey: Sendable, Equatable {
  /// The four key octets as they sit in memory (wire order), loaded natively.
  @usableFromInline var memoryWord: UInt32

  /// From the public API's `UInt32`, whose most significant byte is the first
  /// key octet on the wire (network order, like every other field of §5.2).
  @inlinable init(networkOrder value: UInt32) {
    memoryWord = value.bigEndian
  }

  /// The key of an unmasked frame: XOR with zero changes nothing, so "no mask"
  /// needs no optional (and a masked frame whose key is zero is, rightly, treated
  /// the same way).
  static let none = MaskKey(networkOrder: 0)

  var isNone: Bool { memoryWord == 0 }

  /// From four key octets read off the wire at `pointer`.
  @inlinable init(wireBytesAt pointer: UnsafeRawPointer) {
    memoryWord = pointer.loadUnaligned(as: UInt32.self)
  }

  /// The key as seen by a payload chunk that starts `phase` octets (0…3)
  /// into the masking cycle: octet k of the chunk uses key octet (phase+k)%4.
  @inlinable func rotated(by phase: Int) -> UInt32 {
    let bits = UInt32(truncatingIfNeeded: (phase & 3) * 8)
    if bits == 0 { return memoryWord }
    #if _endian(little)
      // Memory octet 0 is the least significant: skipping octets shifts right.
      return (memoryWord >> bits) | (memoryWord << (32 - bits))
    #else
      return (memoryWord << bits) | (memoryWord >> (32 - bits))
    #endif
  }
}

/// XORs `count` bytes from `source` with the masking key into `destination`.
/// The two may be the same pointer (unmask in place). `phase` is how many
/// payload octets of the frame precede `source[0]` (only its value mod 4
/// matters). Processes 32 then 8 octets per step; no allocation.
@inlinable
func applyMask(
  _ key: MaskKey, phase: Int, source: UnsafeRawPointer,
  destination: UnsafeMutableRawPointer, count: Int
) {
  let key32 = key.rotated(by: phase)
  let key64 = UInt64(key32) | (UInt64(key32) << 32)
  var i = 0
  while i + 32 <= count {
    for lane in stride(from: 0, to: 32, by: 8) {
      let word = source.loadUnaligned(fromByteOffset: i + lane, as: UInt64.self)
      destination.storeBytes(of: word ^ key64, toByteOffset: i + lane, as: UInt64.self)
    }
    i += 32
  }
  while i + 8 <= count {
    let word = source.loadUnaligned(fromByteOffset: i, as: UInt64.self)
    destination.storeBytes(of: word ^ key64, toByteOffset: i, as: UInt64.self)
    i += 8
  }
  // Fewer than 8 left; i is a multiple of 8 (then of 4), so the cycle
  // restarts at key octet 0 each time.
  if i + 4 <= count {
    let word = source.loadUnaligned(fromByteOffset: i, as: UInt32.self)
    destination.storeBytes(of: word ^ key32, toByteOffset: i, as: UInt32.self)
    i += 4
  }
  var key = key32
  while i < count {
    #if _endian(little)
      let keyByte = UInt8(truncatingIfNeeded: key)  // lowest address first
      key >>= 8
    #else
      let keyByte = UInt8(truncatingIfNeeded: key >> 24)
      key <<= 8
    #endif
    let byte = source.load(fromByteOffset: i, as: UInt8.self) ^ keyByte
    destination.storeBytes(of: byte, toByteOffset: i, as: UInt8.self)
    i += 1
  }
}
