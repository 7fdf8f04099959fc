// UTF-8 validation (RFC 3629 §4; RFC 6455 §8.1), as a unit and through the
// decoder: across fragments, across receive() calls, failing fast.

import Testing

@testable import RelayWebSocket
import RelayPrimitives

let validUTF8: [[UInt8]] = [
  [], Array("plain ascii, longer than eight bytes".utf8), Array("κόσμε".utf8),
  [0xC2, 0x80], [0xDF, 0xBF],  // U+0080, U+07FF
  [0xE0, 0xA0, 0x80], [0xEF, 0xBF, 0xBF], [0xEF, 0xBF, 0xBE],  // U+0800, U+FFFF, U+FFFE
  [0xED, 0x9F, 0xBF], [0xEE, 0x80, 0x80],  // U+D7FF, U+E000 (around the surrogates)
  [0xF0, 0x90, 0x80, 0x80], [0xF4, 0x8F, 0xBF, 0xBF],  // U+10000, U+10FFFF
  Array("abcdefg\u{1F600}abcdefgh".utf8),
]

let invalidUTF8: [[UInt8]] = [
  [0x80], [0xBF], [0x41, 0x80, 0x41],  // stray continuation bytes
  [0xC0, 0x80], [0xC1, 0xBF],  // overlong 2-byte
  [0xE0, 0x80, 0x80], [0xE0, 0x9F, 0xBF],  // overlong 3-byte
  [0xF0, 0x80, 0x80, 0x80], [0xF0, 0x8F, 0xBF, 0xBF],  // overlong 4-byte
  [0xED, 0xA0, 0x80], [0xED, 0xBF, 0xBF],  // surrogates U+D800, U+DFFF
  [0xF4, 0x90, 0x80, 0x80], [0xF5, 0x80, 0x80, 0x80],  // above U+10FFFF
  [0xFE], [0xFF], [0xC2, 0x41], [0xE1, 0x80, 0x41], [0xF1, 0x80, 0x80, 0x41],
  [0x41, 0x42, 0x43, 0x44, 0x45, 0x46, 0x47, 0x48, 0xC0],  // after the ASCII fast path
]

let incompleteUTF8: [[UInt8]] = [[0xC2], [0xE1, 0x80], [0xF0, 0x90, 0x80], [0x41, 0xF4]]

@Suite struct UTF8ValidatorTests {
  @Test(arguments: validUTF8)
  func acceptsWellFormed(bytes: [UInt8]) {
    #expect(UTF8Validator.isValid(bytes))
  }

  @Test(arguments: invalidUTF8)
  func rejectsIllFormed(bytes: [UInt8]) {
    #expect(!UTF8Validator.isValid(bytes))
  }

  /// The same sequences inside longer text, where the whole-sequence fast
  /// path (not the byte automaton) judges them.
  @Test func verdictsHoldInsideLongerText() {
    let before = Array("ab".utf8)
    let after = Array("cdefgh".utf8)
    for bytes in validUTF8 {
      #expect(UTF8Validator.isValid(before + bytes + after), "\(hex(bytes))")
    }
    for bytes in invalidUTF8 + incompleteUTF8 {
      #expect(!UTF8Validator.isValid(before + bytes + after), "\(hex(bytes))")
      #expect(!UTF8Validator.isValid(bytes + after), "\(hex(bytes))")
    }
  }

  /// Every lead byte with every second byte, checked against the standard
  /// library, long enough for the fast path and cut short for the automaton.
  @Test func everyTwoBytePrefixAgreesWithTheStandardLibrary() {
    for lead in 0x80...0xFF {
      for second in 0...0xFF {
        for tail in [[0x80, 0x80], [0xBF, 0xBF], [0x41, 0x41]] as [[UInt8]] {
          let bytes = [UInt8(lead), UInt8(second)] + tail + Array("xyz".utf8)
          let expected = String(validating: bytes, as: UTF8.self) != nil
          #expect(UTF8Validator.isValid(bytes) == expected, "\(hex(bytes))")
          var pieces = UTF8Validator()
          let fed = bytes.allSatisfy { byte in [byte].withUnsafeBytes { pieces.feed($0) } }
          #expect((fed && pieces.isComplete) == expected, "byte-wise \(hex(bytes))")
        }
      }
    }
  }

  @Test(arguments: incompleteUTF8)
  func incompleteIsNotValidButNotFailedYet(bytes: [UInt8]) {
    var validator = UTF8Validator()
    #expect(bytes.withUnsafeBytes { validator.feed($0) })
    #expect(!validator.isComplete && !validator.hasFailed)
  }

  @Test func failsOnTheOffendingByteNotLater() {
    var validator = UTF8Validator()
    #expect([UInt8](Array("κό".utf8) + [0xED]).withUnsafeBytes { validator.feed($0) })
    #expect(![UInt8]([0xA0]).withUnsafeBytes { validator.feed($0) })
  }

  @Test func agreesWithTheStandardLibraryOnRandomInput() {
    var rng = SeededRandom(state: 2024)
    for round in 0..<20_000 {
      let count = Int.random(in: 0...(round % 2 == 0 ? 12 : 40), using: &rng)
      // Bias toward interesting bytes: high half and ASCII.
      let bytes = (0..<count).map { _ in
        Bool.random(using: &rng)
          ? UInt8.random(in: 0x80...0xFF, using: &rng) : UInt8.random(in: 0...0x7F, using: &rng)
      }
      let expected = String(validating: bytes, as: UTF8.self) != nil
      #expect(UTF8Validator.isValid(bytes) == expected, "round \(round): \(hex(bytes))")
      // Fed in random pieces: sequences straddle piece boundaries, so both
      // the whole-sequence fast path and the automaton are exercised.
      var pieces = UTF8Validator()
      var fedOK = true
      for chunk in chunks(bytes, split: .random(seed: UInt64(round))) {
        fedOK = chunk.withUnsafeBytes { pieces.feed($0) } && fedOK
      }
      #expect((fedOK && pieces.isComplete) == expected, "pieces round \(round): \(hex(bytes))")
      var single = UTF8Validator()
      let byteWise = bytes.allSatisfy { byte in [byte].withUnsafeBytes { single.feed($0) } }
      #expect(
        (byteWise && single.isComplete) == expected, "byte-wise round \(round): \(hex(bytes))")
    }
  }
}

@Suite struct DecoderUTF8Tests {
  @Test func characterSplitAcrossFragmentsAtEveryPoint() {
    let text = Array("κόσμε \u{1F600} ok".utf8)
    for cut in 0...text.count {
      let input = frame(0x1, Array(text[..<cut]), fin: false) + frame(0x0, Array(text[cut...]))
      #expect(events(input) == [.text(text)], "cut \(cut)")
    }
  }

  @Test func fourByteCharacterInFourFragments() {
    let emoji: [UInt8] = [0xF0, 0x9F, 0x98, 0x80]
    let input =
      frame(0x1, [emoji[0]], fin: false) + frame(0x0, [emoji[1]], fin: false)
      + frame(0x9, []) + frame(0x0, [emoji[2]], fin: false) + frame(0x0, [emoji[3]])
    #expect(events(input).last == .text(emoji))
  }

  @Test(arguments: invalidUTF8)
  func invalidTextFails1007(bytes: [UInt8]) {
    expectFailure(events(frame(0x1, bytes)), code: 1007)
  }

  @Test(arguments: incompleteUTF8)
  func truncatedAtEndOfFinalFragmentFails1007(bytes: [UInt8]) {
    expectFailure(events(frame(0x1, bytes)), code: 1007)
    expectFailure(events(frame(0x1, bytes, fin: false) + frame(0x0, [])), code: 1007)
  }

  @Test(arguments: invalidUTF8 + incompleteUTF8)
  func clientRoleValidatesUnmaskedFramesToo(bytes: [UInt8]) {
    expectFailure(clientEvents(frame(0x1, bytes, from: .server)), code: 1007)
    let padded = Array("abcd".utf8) + bytes
    expectFailure(clientEvents(frame(0x1, padded, from: .server)), code: 1007)
    let fragmented =
      frame(0x1, Array("ab".utf8), fin: false, from: .server) + frame(0x0, bytes, from: .server)
    expectFailure(clientEvents(fragmented), code: 1007)
  }

  @Test func binaryIsNotValidated() {
    #expect(events(frame(0x2, [0xFF, 0xC0])) == [.binary([0xFF, 0xC0])])
  }

  @Test func failsFastOnAPartialFrame() {
    // The frame announces 40 bytes; only 12 arrive, the 9th is invalid.
    let payload = Array("abcdefgh".utf8) + [0xFF] + [UInt8](repeating: 0x41, count: 31)
    let whole = frame(0x1, payload)
    let partial = Array(whole.prefix(6 + 12))
    expectFailure(events(partial), code: 1007)
  }

  @Test func failsFastOnASurrogateSplitAcrossFragments() {
    // Autobahn 6.4.x style: the offending byte arrives in the middle of a
    // later fragment whose end never comes.
    let first = frame(0x1, Array("κόσμε".utf8) + [0xED], fin: false)
    let second = Array(frame(0x0, [0xA0, 0x80] + Array("edited".utf8)).prefix(6 + 1))
    expectFailure(events(first + second), code: 1007)
  }

  @Test func failsFastWithoutWaitingForLaterFragments() {
    let input = frame(0x1, Array("ok".utf8) + [0xC0], fin: false)
    expectFailure(events(input), code: 1007)
  }

  @Test func validatorResetsBetweenMessages() {
    let input = frame(0x1, [0xC2, 0x80]) + frame(0x2, [0xC2]) + frame(0x1, Array("a".utf8))
    #expect(events(input) == [.text([0xC2, 0x80]), .binary([0xC2]), .text(Array("a".utf8))])
  }
}
