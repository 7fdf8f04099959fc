import EventLoop
import RelayCore
import RelayWebSocket

/// Frames a core payload once as an unmasked server text frame in one shared
/// buffer, so a fan-out to N members enqueues N references, not N copies
/// (DESIGN.md, "The hot path").
enum Framing {
  static func textFrame(_ payload: Payload) -> OutboundBuffer {
    frame(.text, payload.bytes)
  }

  static func frame(_ opcode: Opcode, _ bytes: [UInt8]) -> OutboundBuffer {
    let header = WebSocketFrame.headerSize(payloadCount: bytes.count, masked: false)
    return OutboundBuffer(count: header + bytes.count) { out in
      let base = out.baseAddress!
      let written = WebSocketFrame.writeHeader(
        opcode: opcode, payloadCount: bytes.count, fin: true, mask: nil, into: base)
      bytes.withUnsafeBytes { src in
        if src.count > 0 { (base + written).copyMemory(from: src.baseAddress!, byteCount: src.count) }
      }
    }
  }
}
