// Frame header decoding (RFC 6455 §5.2). Pure parsing; the rules about which
// headers are acceptable live in `WebSocketConnection`.

/// A decoded frame header, as sent (the opcode may be a reserved value).
@usableFromInline
struct FrameHeader: Sendable {
  var fin: Bool
  /// RSV1…RSV3 as the three bits 0x70 of byte 0.
  var reservedBits: UInt8
  var opcodeValue: UInt8
  /// The masking key when the MASK bit is set.
  var mask: MaskKey?
  /// Payload length as announced; may have the most significant bit set
  /// (which §5.2 forbids, and the connection rejects).
  var payloadLength: UInt64

  /// The largest header: 2 bytes, a 64-bit extended length, a masking key.
  static let maxSize = 14

  /// Total header size implied by byte 1 (MASK bit and 7-bit length).
  @inline(__always)
  static func size(secondByte: UInt8) -> Int {
    let length7 = secondByte & 0x7F
    let extended = length7 == 126 ? 2 : (length7 == 127 ? 8 : 0)
    return 2 + extended + (secondByte & 0x80 != 0 ? 4 : 0)
  }

  /// Parses a header whose `size(secondByte:)` bytes are all at `bytes`.
  /// Non-minimal length encodings are accepted (§5.2 requires senders to be
  /// minimal but does not ask receivers to check).
  @inline(__always)
  init(parsing bytes: UnsafeRawPointer) {
    let byte0 = bytes.load(as: UInt8.self)
    let byte1 = bytes.load(fromByteOffset: 1, as: UInt8.self)
    fin = byte0 & 0x80 != 0
    reservedBits = byte0 & 0x70
    opcodeValue = byte0 & 0x0F
    var offset = 2
    switch byte1 & 0x7F {
    case 126:
      payloadLength = UInt64(
        UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt16.self)))
      offset = 4
    case 127:
      payloadLength = UInt64(bigEndian: bytes.loadUnaligned(fromByteOffset: 2, as: UInt64.self))
      offset = 10
    default:
      payloadLength = UInt64(byte1 & 0x7F)
    }
    mask = byte1 & 0x80 != 0 ? MaskKey(wireBytesAt: bytes + offset) : nil
  }
}
