// Test helpers: OpenSSL's SHA-1, seeded bytes, an independent raw frame builder (so decoder tests do not trust the encoder under test), and
// feeding strategies that must all yield the same events.

import Testing

@testable import RelayWebSocket
import RelayCrypto
import RelayPrimitives

/// SHA-1 from OpenSSL, as production injects it.
func testSHA1(_ message: [UInt8]) -> [UInt8] { Crypto.sha1(message) }

func hex(_ bytes: [UInt8]) -> String {
  bytes.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
}

func randomBytes(_ count: Int, seed: UInt64) -> [UInt8] {
  var rng = SeededRandom(state: seed)
  return (0..<count).map { _ in UInt8.random(in: 0...255, using: &rng) }
}

/// How the extended length is written (receivers must accept every form).
enum LengthForm { case minimal, sixteen, sixtyFour }

/// Builds a frame by hand from RFC 6455 §5.2, independent of the encoder.
func rawFrame(
  _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0,
  mask: [UInt8]? = [0x37, 0xFA, 0x21, 0x3D], lengthForm: LengthForm = .minimal,
  lengthOverride: UInt64? = nil
) -> [UInt8] {
  var out: [UInt8] = [(fin ? 0x80 : 0) | (rsv << 4) | opcode]
  let maskBit: UInt8 = mask == nil ? 0 : 0x80
  let length = lengthOverride ?? UInt64(payload.count)
  var form = lengthForm
  if form == .minimal {
    form = length <= 125 ? .minimal : (length <= 0xFFFF ? .sixteen : .sixtyFour)
  }
  switch form {
  case .minimal: out.append(maskBit | UInt8(length))
  case .sixteen:
    out.append(maskBit | 126)
    out += [UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
  case .sixtyFour:
    out.append(maskBit | 127)
    out += (0..<8).map { UInt8(truncatingIfNeeded: length >> UInt64(56 - 8 * $0)) }
  }
  if let mask {
    out += mask
    out += payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
  } else {
    out += payload
  }
  return out
}

/// A client (masked) or server (unmasked) frame, by role of the *sender*.
func frame(
  _ opcode: UInt8, _ payload: [UInt8], fin: Bool = true, rsv: UInt8 = 0,
  from sender: WebSocketRole = .client
) -> [UInt8] {
  rawFrame(
    opcode, payload, fin: fin, rsv: rsv, mask: sender == .client ? [0x37, 0xFA, 0x21, 0x3D] : nil)
}

func closeFrame(code: UInt16, reason: [UInt8] = [], from sender: WebSocketRole = .client) -> [UInt8]
{
  frame(0x8, [UInt8(code >> 8), UInt8(code & 0xFF)] + reason, from: sender)
}

/// How input is cut before it reaches `receive`.
enum Split: CustomStringConvertible {
  case whole
  case byteByByte
  case random(seed: UInt64)
  var description: String {
    switch self {
    case .whole: return "whole"
    case .byteByByte: return "byte-by-byte"
    case .random(let seed): return "random(\(seed))"
    }
  }
}

let allSplits: [Split] = [.whole, .byteByByte] + (1...6).map { .random(seed: $0) }

func feed(_ connection: inout WebSocketConnection, _ input: [UInt8], split: Split)
  -> [WebSocketEvent]
{
  var events: [WebSocketEvent] = []
  for chunk in chunks(input, split: split) {
    chunk.withUnsafeBytes { raw in connection.receive(raw) { events.append($0) } }
  }
  return events
}

func chunks(_ input: [UInt8], split: Split) -> [ArraySlice<UInt8>] {
  var chunks: [ArraySlice<UInt8>] = []
  switch split {
  case .whole: chunks = [input[...]]
  case .byteByByte: chunks = input.indices.map { input[$0...$0] }
  case .random(let seed):
    var rng = SeededRandom(state: seed)
    var start = 0
    while start < input.count {
      // Mostly small pieces (headers and characters split), sometimes big.
      let cap = Int.random(in: 0..<4, using: &rng) == 0 ? 3000 : 16
      let length = Int.random(in: 1...max(1, min(input.count - start, cap)), using: &rng)
      chunks.append(input[start..<start + length])
      start += length
    }
  }
  return chunks
}

/// Like `feed`, through the borrowing `receive(_:onMessage:emit:)`; messages
/// are copied out as `.text` / `.binary` events for comparison.
func feedBorrowing(_ connection: inout WebSocketConnection, _ input: [UInt8], split: Split)
  -> [WebSocketEvent]
{
  var events: [WebSocketEvent] = []
  for chunk in chunks(input, split: split) {
    chunk.withUnsafeBytes { raw in
      connection.receive(
        raw,
        onMessage: { opcode, payload in
          events.append(opcode == .text ? .text(Array(payload)) : .binary(Array(payload)))
        },
        emit: { events.append($0) })
    }
  }
  return events
}

/// Like `feedBorrowing`, through `receive(overwriting:onMessage:emit:)`, each chunk
/// in a scratch copy the codec may unmask in place (as the server's read buffer).
func feedOverwriting(_ connection: inout WebSocketConnection, _ input: [UInt8], split: Split)
  -> [WebSocketEvent]
{
  var events: [WebSocketEvent] = []
  for chunk in chunks(input, split: split) {
    var scratch = Array(chunk)
    scratch.withUnsafeMutableBytes { raw in
      connection.receive(
        overwriting: raw,
        onMessage: { opcode, payload in
          events.append(opcode == .text ? .text(Array(payload)) : .binary(Array(payload)))
        },
        emit: { events.append($0) })
    }
  }
  return events
}

/// Feeds `input` to a fresh connection under every split strategy, expects
/// identical events from all, and returns them.
func events(
  _ input: [UInt8], role: WebSocketRole = .server, maxMessageBytes: Int = 65_536,
  splits: [Split] = allSplits, sourceLocation: SourceLocation = #_sourceLocation
) -> [WebSocketEvent] {
  var reference: [WebSocketEvent]?
  for split in splits {
    var connection = WebSocketConnection(role: role, maxMessageBytes: maxMessageBytes)
    let got = feed(&connection, input, split: split)
    var borrowing = WebSocketConnection(role: role, maxMessageBytes: maxMessageBytes)
    let borrowed = feedBorrowing(&borrowing, input, split: split)
    #expect(
      borrowed == got, "borrowing API differs under split \(split)", sourceLocation: sourceLocation)
    var overwriting = WebSocketConnection(role: role, maxMessageBytes: maxMessageBytes)
    #expect(
      feedOverwriting(&overwriting, input, split: split) == got,
      "overwriting API differs under split \(split)", sourceLocation: sourceLocation)
    if let reference {
      #expect(got == reference, "split \(split) differs", sourceLocation: sourceLocation)
    } else {
      reference = got
    }
  }
  return reference ?? []
}

/// The close frame a server writes on failure: 0x88, length, code, reason.
func serverClose(_ code: UInt16, _ reason: String) -> WebSocketEvent {
  .write(
    WebSocketFrame.encode(
      opcode: .close, payload: WebSocketFrame.closePayload(code: code, reason: reason)))
}

/// The close code in a written close frame (unmasked from a server, masked
/// from a client).
func closeCode(in event: WebSocketEvent) -> UInt16? {
  guard case .write(let bytes) = event, bytes.count >= 4, bytes[0] == 0x88 else { return nil }
  if bytes[1] & 0x80 == 0 { return UInt16(bytes[2]) << 8 | UInt16(bytes[3]) }
  guard bytes.count >= 8 else { return nil }
  return UInt16(bytes[6] ^ bytes[2]) << 8 | UInt16(bytes[7] ^ bytes[3])
}

/// Asserts the events end with a failure: a close frame with `code`, then `.closed`.
func expectFailure(
  _ events: [WebSocketEvent], code: UInt16, sourceLocation: SourceLocation = #_sourceLocation
) {
  #expect(
    events.count >= 2, "expected close write + closed, got \(events)",
    sourceLocation: sourceLocation)
  guard events.count >= 2 else { return }
  #expect(
    closeCode(in: events[events.count - 2]) == code, "\(events)", sourceLocation: sourceLocation)
  if case .closed(let closedCode, _, let byPeer) = events[events.count - 1] {
    #expect(closedCode == code, sourceLocation: sourceLocation)
    #expect(!byPeer, sourceLocation: sourceLocation)
  } else {
    Issue.record("last event is not .closed: \(events)", sourceLocation: sourceLocation)
  }
}
