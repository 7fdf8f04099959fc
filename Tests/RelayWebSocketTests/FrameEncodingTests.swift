// Encoder tests (RFC 6455 §5.2, §5.3) and encoder → decoder round trips.

import Testing

@testable import RelayWebSocket

let boundaryLengths = [0, 1, 7, 8, 9, 125, 126, 127, 65_535, 65_536, 1 << 20]

@Suite struct FrameEncodingTests {
  @Test(arguments: boundaryLengths)
  func unmaskedEncodingMatchesHandBuiltFrame(length: Int) {
    let payload = randomBytes(length, seed: UInt64(length))
    let encoded = WebSocketFrame.encode(opcode: .binary, payload: payload)
    #expect(encoded == rawFrame(0x2, payload, mask: nil))
    #expect(
      encoded.count == WebSocketFrame.headerSize(payloadCount: length, masked: false) + length)
  }

  @Test(arguments: boundaryLengths)
  func maskedEncodingMatchesHandBuiltFrame(length: Int) {
    let payload = randomBytes(length, seed: UInt64(length) + 99)
    let encoded = WebSocketFrame.encode(opcode: .text, payload: payload, mask: 0x37FA_213D)
    #expect(encoded == rawFrame(0x1, payload, mask: [0x37, 0xFA, 0x21, 0x3D]))
    #expect(encoded.count == WebSocketFrame.headerSize(payloadCount: length, masked: true) + length)
  }

  @Test func headerSizesUseMinimalLengthForms() {
    #expect(WebSocketFrame.headerSize(payloadCount: 0, masked: false) == 2)
    #expect(WebSocketFrame.headerSize(payloadCount: 125, masked: false) == 2)
    #expect(WebSocketFrame.headerSize(payloadCount: 126, masked: false) == 4)
    #expect(WebSocketFrame.headerSize(payloadCount: 65_535, masked: false) == 4)
    #expect(WebSocketFrame.headerSize(payloadCount: 65_536, masked: false) == 10)
    #expect(WebSocketFrame.headerSize(payloadCount: 65_536, masked: true) == 14)
  }

  @Test func lengthFieldBytesAreExact() {
    #expect(
      Array(
        WebSocketFrame.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 125)).prefix(2)
      ) == [0x82, 125])
    #expect(
      Array(
        WebSocketFrame.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 126)).prefix(4)
      ) == [0x82, 126, 0, 126])
    #expect(
      Array(
        WebSocketFrame.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 65_535))
          .prefix(4)) == [0x82, 126, 0xFF, 0xFF])
    #expect(
      Array(
        WebSocketFrame.encode(opcode: .binary, payload: [UInt8](repeating: 0, count: 65_536))
          .prefix(10)) == [0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0])
  }

  @Test func finAndOpcodeBits() {
    #expect(WebSocketFrame.encode(opcode: .text, payload: [], fin: false) == [0x01, 0x00])
    #expect(WebSocketFrame.encode(opcode: .continuation, payload: [], fin: true) == [0x80, 0x00])
    #expect(WebSocketFrame.encode(opcode: .ping, payload: [1]) == [0x89, 0x01, 0x01])
  }

  @Test func writeHeaderThenPayloadEqualsEncode() {
    let payload = randomBytes(300, seed: 5)
    var buffer = [UInt8](repeating: 0, count: 14)
    let written = buffer.withUnsafeMutableBytes {
      WebSocketFrame.writeHeader(
        opcode: .binary, payloadCount: 300, fin: true, mask: nil, into: $0.baseAddress!)
    }
    #expect(
      Array(buffer.prefix(written)) + payload
        == WebSocketFrame.encode(opcode: .binary, payload: payload))
  }

  @Test func rfcMaskedHelloExample() {
    // RFC 6455 §5.7: a single-frame masked text message "Hello".
    let expected: [UInt8] = [0x81, 0x85, 0x37, 0xFA, 0x21, 0x3D, 0x7F, 0x9F, 0x4D, 0x51, 0x58]
    #expect(
      WebSocketFrame.encode(opcode: .text, payload: Array("Hello".utf8), mask: 0x37FA_213D)
        == expected)
  }

  @Test func closePayloadEncodesCodeAndTruncatesReasonAtCharacterBoundary() {
    #expect(WebSocketFrame.closePayload(code: 1000, reason: "") == [0x03, 0xE8])
    #expect(WebSocketFrame.closePayload(code: 4008, reason: "ab") == [0x0F, 0xA8, 0x61, 0x62])
    let long = String(repeating: "é", count: 100)  // 200 bytes of UTF-8
    let payload = WebSocketFrame.closePayload(code: 1001, reason: long)
    #expect(payload.count == 124)  // 2 + 61 * 2; one more "é" would exceed 125
    #expect(UTF8Validator.isValid(Array(payload.dropFirst(2))))
  }

  @Test(arguments: boundaryLengths, [WebSocketRole.server, .client])
  func roundTripThroughTheDecoder(length: Int, sender: WebSocketRole) {
    var encoder = WebSocketConnection(role: sender, maxMessageBytes: 2 << 20, maskSeed: 42)
    let payload = randomBytes(length, seed: UInt64(length) &* 31)
    let wire = encoder.encode(.binary, payload)
    let receiverRole: WebSocketRole = sender == .server ? .client : .server
    var decoder = WebSocketConnection(role: receiverRole, maxMessageBytes: 2 << 20)
    let got = feed(&decoder, wire, split: length > 70_000 ? .random(seed: 3) : .byteByByte)
    #expect(got == [.binary(payload)])
  }

  @Test func clientMasksDifferFrameToFrame() {
    var client = WebSocketConnection(role: .client, maskSeed: 7)
    let first = client.encode(.text, Array("same".utf8))
    let second = client.encode(.text, Array("same".utf8))
    #expect(first[1] & 0x80 != 0 && second[1] & 0x80 != 0)
    #expect(first[2..<6] != second[2..<6])
  }

  @Test func serverFramesAreUnmasked() {
    var server = WebSocketConnection(role: .server)
    #expect(server.encode(.text, Array("hi".utf8)) == [0x81, 0x02, 0x68, 0x69])
  }

  @Test(arguments: 0..<12)
  func maskingAtEveryPhaseMatchesBytewiseXor(phase: Int) {
    let key: [UInt8] = [0xA1, 0xB2, 0xC3, 0xD4]
    // Every count up to 80 reaches every mix of the 32-, 8-, 4- and 1-byte
    // steps; in place and into a separate buffer.
    for count in 0...80 {
      let source = randomBytes(count, seed: UInt64(phase * 100 + count))
      let expected = source.enumerated().map { $0.element ^ key[($0.offset + phase) % 4] }
      var destination = [UInt8](repeating: 0, count: count)
      var inPlace = source
      source.withUnsafeBytes { src in
        destination.withUnsafeMutableBytes { dst in
          applyMask(
            MaskKey(networkOrder: 0xA1B2_C3D4), phase: phase, source: src.baseAddress!,
            destination: dst.baseAddress!, count: count)
        }
      }
      inPlace.withUnsafeMutableBytes { raw in
        applyMask(
          MaskKey(networkOrder: 0xA1B2_C3D4), phase: phase, source: raw.baseAddress!,
          destination: raw.baseAddress!, count: count)
      }
      #expect(destination == expected, "count \(count)")
      #expect(inPlace == expected, "in place, count \(count)")
    }
  }
}

@Suite struct FrameAppendTests {
  @Test(arguments: boundaryLengths)
  func appendEqualsEncodeAfterExistingBytes(length: Int) {
    let payload = randomBytes(length, seed: UInt64(length) &+ 7)
    for mask in [nil, UInt32(0x0102_0304)] {
      var buffer: [UInt8] = [0xAA, 0xBB]
      payload.withUnsafeBytes {
        WebSocketFrame.append(opcode: .binary, payload: $0, mask: mask, to: &buffer)
      }
      #expect(
        buffer == [0xAA, 0xBB]
          + WebSocketFrame.encode(opcode: .binary, payload: payload, mask: mask))
    }
  }
}
