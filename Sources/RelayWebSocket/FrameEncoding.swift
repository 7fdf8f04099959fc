// Frame encoding (RFC 6455 §5.2):
//
//   byte 0: FIN | RSV1 | RSV2 | RSV3 | opcode(4)
//   byte 1: MASK | payload length (7): 0…125, 126 → 16-bit length follows,
//           127 → 64-bit length follows (most significant bit 0)
//   then the extended length in network byte order, then the 4-octet masking
//   key when MASK is set, then the payload.
//
// We always send the minimal length form (§5.2: "the minimal number of bytes
// MUST be used to encode the length").

/// WebSocket opcodes (RFC 6455 §5.2, §11.8). 3–7 and 0xB–0xF are reserved.
public enum Opcode: UInt8, Sendable {
  case continuation = 0
  case text = 1
  case binary = 2
  case close = 8
  case ping = 9
  case pong = 10

  /// Control frames have the most significant opcode bit set (§5.5).
  @inlinable public var isControl: Bool { rawValue & 0x8 != 0 }
}

/// Stateless frame encoding helpers.
public enum WebSocketFrame {
  /// Largest payload a control frame may carry (RFC 6455 §5.5).
  public static let maxControlPayload = 125

  /// Bytes of frame header for a payload of `payloadCount` bytes: 2, plus 2
  /// or 8 for the extended length, plus 4 for the masking key.
  @inlinable
  public static func headerSize(payloadCount: Int, masked: Bool) -> Int {
    let lengthBytes = payloadCount <= 125 ? 0 : (payloadCount <= 0xFFFF ? 2 : 8)
    return 2 + lengthBytes + (masked ? 4 : 0)
  }

  /// Writes just the header into `into` (which must have room for
  /// `headerSize(payloadCount:masked:)` bytes) and returns the bytes written.
  /// The payload must then be written after it, masked with the same key
  /// when `mask` is given. Lets the server frame one shared payload once.
  @inlinable
  public static func writeHeader(
    opcode: Opcode, payloadCount: Int, fin: Bool, mask: UInt32?,
    into: UnsafeMutableRawPointer
  ) -> Int {
    precondition(payloadCount >= 0, "negative payload length")
    into.storeBytes(of: (fin ? 0x80 : 0) | opcode.rawValue, as: UInt8.self)
    let maskBit: UInt8 = mask == nil ? 0 : 0x80
    var offset = 2
    if payloadCount <= 125 {
      into.storeBytes(of: maskBit | UInt8(payloadCount), toByteOffset: 1, as: UInt8.self)
    } else if payloadCount <= 0xFFFF {
      into.storeBytes(of: maskBit | 126, toByteOffset: 1, as: UInt8.self)
      into.storeBytes(of: UInt16(payloadCount).bigEndian, toByteOffset: 2, as: UInt16.self)
      offset = 4
    } else {
      into.storeBytes(of: maskBit | 127, toByteOffset: 1, as: UInt8.self)
      into.storeBytes(of: UInt64(payloadCount).bigEndian, toByteOffset: 2, as: UInt64.self)
      offset = 10
    }
    if let mask {
      into.storeBytes(of: mask.bigEndian, toByteOffset: offset, as: UInt32.self)
      offset += 4
    }
    return offset
  }

  /// Encodes one complete frame: header plus payload, masked when `mask` is
  /// given (client role, §5.3). One allocation, one pass over the payload.
  public static func encode(
    opcode: Opcode, payload: UnsafeRawBufferPointer, fin: Bool = true, mask: UInt32? = nil
  ) -> [UInt8] {
    let count = payload.count
    let total = headerSize(payloadCount: count, masked: mask != nil) + count
    return [UInt8](unsafeUninitializedCapacity: total) { buffer, initialized in
      let out = UnsafeMutableRawPointer(buffer.baseAddress!)
      let headerBytes = writeHeader(
        opcode: opcode, payloadCount: count, fin: fin, mask: mask, into: out)
      if let source = payload.baseAddress, count > 0 {
        let destination = out + headerBytes
        if let mask {
          applyMask(
            MaskKey(networkOrder: mask), phase: 0, source: source,
            destination: destination, count: count)
        } else {
          destination.copyMemory(from: source, byteCount: count)
        }
      }
      initialized = total
    }
  }

  /// Appends one frame to `buffer` (a connection's outbound "cork" buffer):
  /// no allocation while `buffer` has capacity. Same bytes as `encode`.
  public static func append(
    opcode: Opcode, payload: UnsafeRawBufferPointer, fin: Bool = true, mask: UInt32? = nil,
    to buffer: inout [UInt8]
  ) {
    let count = payload.count
    var header: (UInt64, UInt64) = (0, 0)  // 16 bytes of stack for ≤ 14
    let headerBytes = withUnsafeMutableBytes(of: &header) {
      writeHeader(opcode: opcode, payloadCount: count, fin: fin, mask: mask, into: $0.baseAddress!)
    }
    // No reserveCapacity: it grows to the exact size, which turns many
    // appends into quadratic copying; append's own growth is geometric.
    withUnsafeBytes(of: header) { buffer.append(contentsOf: $0.prefix(headerBytes)) }
    buffer.append(contentsOf: payload)
    guard let mask, count > 0 else { return }
    buffer.withUnsafeMutableBytes { raw in
      let tail = raw.baseAddress! + (raw.count - count)
      applyMask(
        MaskKey(networkOrder: mask), phase: 0, source: tail, destination: tail, count: count)
    }
  }

  /// Array convenience for `encode(opcode:payload:fin:mask:)`.
  public static func encode(
    opcode: Opcode, payload: [UInt8], fin: Bool = true, mask: UInt32? = nil
  ) -> [UInt8] {
    payload.withUnsafeBytes { encode(opcode: opcode, payload: $0, fin: fin, mask: mask) }
  }

  /// The payload of a close frame (§5.5.1): the code in network order, then
  /// the reason as UTF-8, truncated at a character boundary so the payload
  /// stays within the 125-byte control frame limit (123 bytes of reason).
  public static func closePayload(code: UInt16, reason: String) -> [UInt8] {
    var payload: [UInt8] = [UInt8(code >> 8), UInt8(code & 0xFF)]
    payload.reserveCapacity(maxControlPayload)
    for scalar in reason.unicodeScalars {
      let encoded = UTF8.encode(scalar)!
      if payload.count + encoded.count > maxControlPayload { break }
      payload.append(contentsOf: encoded)
    }
    return payload
  }
}
