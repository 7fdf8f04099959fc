// Decoder rules (RFC 6455 §5): lengths, masking by role, reserved bits and
// opcodes, control frames, fragmentation, size limit. Every input is fed
// whole, byte by byte and at seeded random split points (see `events`).

import Testing

@testable import RelayWebSocket

/// Splits cheap enough for megabyte inputs.
let bigSplits: [Split] = [.whole, .random(seed: 11), .random(seed: 12)]

@Suite struct DecoderTests {
  @Test(arguments: boundaryLengths)
  func serverReceivesMaskedFramesOfEveryLength(length: Int) {
    let payload = randomBytes(length, seed: UInt64(length) ^ 0xABCD)
    let input = frame(0x2, payload)
    let got = events(input, maxMessageBytes: 2 << 20, splits: length > 1000 ? bigSplits : allSplits)
    #expect(got == [.binary(payload)])
  }

  @Test(arguments: boundaryLengths)
  func clientReceivesUnmaskedFramesOfEveryLength(length: Int) {
    let payload = Array(repeating: UInt8(ascii: "x"), count: length)
    let input = frame(0x1, payload, from: .server)
    let got = events(
      input, role: .client, maxMessageBytes: 2 << 20, splits: length > 1000 ? bigSplits : allSplits)
    #expect(got == [.text(payload)])
  }

  @Test(arguments: [LengthForm.sixteen, .sixtyFour])
  func nonMinimalLengthEncodingsAreAccepted(form: LengthForm) {
    let input = rawFrame(0x1, Array("abc".utf8), lengthForm: form)
    #expect(events(input) == [.text(Array("abc".utf8))])
  }

  @Test func severalFramesInOneBufferGiveSeveralEvents() {
    let input = frame(0x1, Array("one".utf8)) + frame(0x2, [1, 2]) + frame(0x1, [])
    #expect(events(input) == [.text(Array("one".utf8)), .binary([1, 2]), .text([])])
  }

  @Test func serverRejectsUnmaskedFrame() {
    expectFailure(events(frame(0x1, Array("hi".utf8), from: .server)), code: 1002)
  }

  @Test func clientRejectsMaskedFrame() {
    expectFailure(clientEvents(frame(0x1, Array("hi".utf8), from: .client)), code: 1002)
  }

  @Test(arguments: [UInt8(1), 2, 4, 3, 7])
  func reservedBitsFail(rsv: UInt8) {
    expectFailure(events(frame(0x1, Array("hi".utf8), rsv: rsv)), code: 1002)
  }

  @Test(arguments: [UInt8(3), 4, 5, 6, 7, 0xB, 0xC, 0xD, 0xE, 0xF])
  func reservedOpcodesFail(opcode: UInt8) {
    expectFailure(events(frame(opcode, [])), code: 1002)
    expectFailure(events(frame(opcode, [1, 2, 3])), code: 1002)
  }

  @Test func badFirstBytesFailBeforeTheHeaderIsComplete() {
    expectFailure(events([0xC1]), code: 1002)  // RSV1
    expectFailure(events([0x83]), code: 1002)  // opcode 3
    expectFailure(events([0x81, 0x7E]), code: 1002)  // unmasked, 16-bit length owed
    expectFailure(events([0x81, 0xFE], role: .client), code: 1002)  // masked from a server
    #expect(events([0x81, 0xFE, 0x00]).isEmpty)  // fine so far
  }

  @Test func lengthWithMostSignificantBitSetFails() {
    let input = rawFrame(0x2, [], lengthForm: .sixtyFour, lengthOverride: 1 << 63)
    expectFailure(events(input), code: 1002)
  }

  @Test func maskedClientFramesAllowAnyKey() {
    let input =
      rawFrame(0x1, Array("key".utf8), mask: [0, 0, 0, 0])
      + rawFrame(0x1, Array("key".utf8), mask: [0xFF, 0xFF, 0xFF, 0xFF])
    #expect(events(input) == [.text(Array("key".utf8)), .text(Array("key".utf8))])
  }

  // MARK: Control frames (§5.5)

  @Test func pingIsAnsweredWithPongCarryingTheSamePayload() {
    let payload = Array("ping!".utf8)
    let got = events(frame(0x9, payload))
    #expect(
      got == [.write(WebSocketFrame.encode(opcode: .pong, payload: payload)), .ping(payload)])
  }

  @Test func pingOf125BytesIsFine() {
    let payload = randomBytes(125, seed: 125)
    #expect(events(frame(0x9, payload)).last == .ping(payload))
  }

  @Test func clientRolePongIsMasked() {
    let got = clientEvents(frame(0x9, [1, 2, 3], from: .server))
    guard case .write(let bytes)? = got.first else {
      Issue.record("no pong written: \(got)")
      return
    }
    #expect(bytes[0] == 0x8A && bytes[1] == 0x83)
    var server = WebSocketConnection(role: .server)
    #expect(feed(&server, bytes, split: .whole) == [.pong([1, 2, 3])])
  }

  @Test func unsolicitedPongIsOnlyReported() {
    #expect(events(frame(0xA, Array("hb".utf8))) == [.pong(Array("hb".utf8))])
  }

  @Test(arguments: [UInt8(0x8), 0x9, 0xA])
  func controlFramePayloadOver125Fails(opcode: UInt8) {
    expectFailure(events(frame(opcode, [UInt8](repeating: 0x41, count: 126))), code: 1002)
  }

  @Test(arguments: [UInt8(0x8), 0x9, 0xA])
  func fragmentedControlFrameFails(opcode: UInt8) {
    expectFailure(events(frame(opcode, [], fin: false)), code: 1002)
  }

  // MARK: Fragmentation (§5.4)

  @Test func fragmentsAreReassembledWithControlFramesHandledInBetween() {
    let input =
      frame(0x1, Array("Hel".utf8), fin: false) + frame(0x9, Array("p".utf8))
      + frame(0x0, Array("lo, ".utf8), fin: false) + frame(0xA, [])
      + frame(0x0, [], fin: false) + frame(0x0, Array("world".utf8))
    let got = events(input)
    #expect(
      got == [
        .write(WebSocketFrame.encode(opcode: .pong, payload: Array("p".utf8))),
        .ping(Array("p".utf8)),
        .pong([]), .text(Array("Hello, world".utf8)),
      ])
  }

  @Test func fragmentedBinaryWithEmptyFirstFragment() {
    let input = frame(0x2, [], fin: false) + frame(0x0, [9, 8]) + frame(0x2, [7])
    #expect(events(input) == [.binary([9, 8]), .binary([7])])
  }

  @Test func manySmallFragmentsReassemble() {
    let payload = randomBytes(65_536, seed: 77)
    var input = frame(0x2, Array(payload[0..<64]), fin: false)
    for start in stride(from: 64, to: 65_536, by: 64) {
      input += frame(0x0, Array(payload[start..<start + 64]), fin: start + 64 == 65_536)
    }
    #expect(events(input, splits: bigSplits) == [.binary(payload)])
  }

  @Test func continuationWithoutMessageFails() {
    expectFailure(events(frame(0x0, Array("x".utf8))), code: 1002)
    expectFailure(events(frame(0x0, Array("x".utf8), fin: false)), code: 1002)
  }

  @Test(arguments: [UInt8(0x1), 0x2])
  func newDataFrameDuringFragmentedMessageFails(opcode: UInt8) {
    let input = frame(0x1, Array("a".utf8), fin: false) + frame(opcode, Array("b".utf8))
    expectFailure(events(input), code: 1002)
  }

  @Test func continuationAfterCompletedMessageFails() {
    let input = frame(0x1, Array("a".utf8)) + frame(0x0, Array("b".utf8))
    let got = events(input)
    #expect(got.first == .text(Array("a".utf8)))
    expectFailure(got, code: 1002)
  }

  /// RFC 6455 §5.4, §7.1.7: frames are processed in order, so a complete message
  /// before a bad frame in the same buffer is delivered, then the connection fails
  /// (the Autobahn 3.2, 4.1.3, 4.2.3 and 5.15 shapes), whatever the split.
  @Test(arguments: [
    frame(0x1, Array("bad".utf8), rsv: 2),
    frame(0x5, Array("bad".utf8)),
    frame(0xB, []),
    frame(0x0, Array("orphan".utf8), fin: false),
  ])
  func messagesBeforeAViolationInTheSameBufferAreDelivered(bad: [UInt8]) {
    let input = frame(0x1, Array("good".utf8)) + bad + frame(0x9, Array("p".utf8))
    let got = events(input)
    #expect(got.first == .text(Array("good".utf8)))
    #expect(got.count == 3, "\(got)")  // the message, the close frame, closed: no pong
    expectFailure(got, code: 1002)
  }

  @Test func fragmentedMessageThenOrphanContinuationInOneBuffer() {
    let input =
      frame(0x1, Array("frag".utf8), fin: false) + frame(0x0, Array("ment1".utf8))
      + frame(0x0, Array("orphan".utf8), fin: false) + frame(0x1, Array("never".utf8))
    let got = events(input)
    #expect(got.first == .text(Array("fragment1".utf8)))
    #expect(got.count == 3, "\(got)")
    expectFailure(got, code: 1002)
  }

  // MARK: Limits

  @Test func messageAtTheLimitIsDelivered() {
    let payload = [UInt8](repeating: 1, count: 1000)
    #expect(events(frame(0x2, payload), maxMessageBytes: 1000) == [.binary(payload)])
  }

  @Test func oversizedFrameFailsAsSoonAsTheHeaderArrives() {
    let header = Array(frame(0x2, [UInt8](repeating: 1, count: 1001)).prefix(8))  // 2 + 2 + 4
    expectFailure(events(header, maxMessageBytes: 1000), code: 1009)
  }

  @Test func fragmentsSummingOverTheLimitFail() {
    let input =
      frame(0x2, [UInt8](repeating: 1, count: 600), fin: false)
      + Array(frame(0x0, [UInt8](repeating: 1, count: 401)).prefix(8))
    expectFailure(events(input, maxMessageBytes: 1000), code: 1009)
  }

  @Test func hugeAnnouncedLengthFails1009NotCrash() {
    let input = rawFrame(0x2, [], lengthForm: .sixtyFour, lengthOverride: (1 << 63) - 1)
    expectFailure(events(input), code: 1009)
  }

  @Test func inputAfterFailureIsIgnored() {
    var connection = WebSocketConnection(role: .server)
    let first = feed(&connection, frame(0x3, []), split: .whole)
    expectFailure(first, code: 1002)
    #expect(feed(&connection, frame(0x1, Array("late".utf8)), split: .whole).isEmpty)
    #expect(connection.state == .closed)
  }
}

func clientEvents(_ input: [UInt8]) -> [WebSocketEvent] {
  events(input, role: .client)
}
