// Incremental UTF-8 validation (RFC 3629 §4, required for text messages and
// close reasons by RFC 6455 §5.6, §8.1 and §7.1.6).
//
// A small deterministic automaton over byte classes, plus two fast paths that
// agree with it: runs of ASCII are skipped 16 and 8 bytes at a time, and a
// whole multi-byte sequence that lies inside the piece is checked in one step. It accepts exactly the
// well-formed sequences of RFC 3629 §4 (no overlongs, no surrogates
// U+D800…U+DFFF, nothing above U+10FFFF) and reports a definitely-invalid
// sequence on the very byte that makes it so, which lets the decoder fail a
// text message before the rest of its payload arrives (RFC 6455 §8.1:
// "MUST _Fail the WebSocket Connection_" as soon as it knows).

/// Validates UTF-8 fed in arbitrary pieces; state survives between pieces.
public struct UTF8Validator: Sendable {
  // Automaton states.
  @usableFromInline static let accept: UInt8 = 0  // between characters
  @usableFromInline static let reject: UInt8 = 1  // sticky failure
  static let tail1: UInt8 = 2  // one continuation byte (80..BF) still owed
  static let tail2: UInt8 = 3  // two owed
  static let tail3: UInt8 = 4  // three owed
  static let afterE0: UInt8 = 5  // next must be A0..BF (no overlong 3-byte)
  static let afterED: UInt8 = 6  // next must be 80..9F (no surrogates)
  static let afterF0: UInt8 = 7  // next must be 90..BF (no overlong 4-byte)
  static let afterF4: UInt8 = 8  // next must be 80..8F (nothing > U+10FFFF)
  static let stateCount = 9
  static let classCount = 16  // 12 used; a power of two keeps indexing cheap

  /// Bytes 0…255 map to a class; the transitions follow at offset 256,
  /// indexed by `state * classCount + class`. One array, one lookup base.
  @usableFromInline static let table: [UInt8] = buildTable()

  @usableFromInline var state: UInt8 = UTF8Validator.accept

  /// A fresh validator, between characters.
  public init() {}

  /// True when everything fed so far is a complete, valid sequence.
  @inlinable public var isComplete: Bool { state == Self.accept }
  /// True once an invalid sequence was seen (stays true until `reset`).
  @inlinable public var hasFailed: Bool { state == Self.reject }

  /// Forget all input (start of a new message).
  @inlinable public mutating func reset() { state = Self.accept }

  /// Validates the next piece. Returns false as soon as a byte makes the
  /// input invalid (and on every later call).
  public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard let base = bytes.baseAddress, state != Self.reject else {
      return state != Self.reject
    }
    let count = bytes.count
    var start = 0
    if state == Self.accept {
      // Pure ASCII (most JSON) never touches the tables.
      start = Self.skipASCII(base, from: 0, count: count)
      if start == count { return true }
    }
    let from = state
    state = Self.table.withUnsafeBufferPointer {
      Self.run(table: $0.baseAddress!, bytes: base + start, count: count - start, state: from)
    }
    return state != Self.reject
  }

  /// The validation loop; plain locals only (no captured variables), so the
  /// position and state stay in registers.
  static func run(
    table: UnsafePointer<UInt8>, bytes base: UnsafeRawPointer, count: Int, state: UInt8
  ) -> UInt8 {
    var s = state
    var i = 0
    while i < count {
      if s == accept {
        if base.load(fromByteOffset: i, as: UInt8.self) < 0x80 {
          i = skipASCII(base, from: i + 1, count: count)
          continue
        }
        // Between characters with a whole sequence ahead: check it at once.
        if i + 4 <= count {
          let length = sequenceLength(base + i)
          if length == 0 { return reject }
          i += length
          continue
        }
      }
      // Near the end of the piece, or finishing one the last piece began:
      // one byte at a time through the automaton.
      let byteClass = table[Int(base.load(fromByteOffset: i, as: UInt8.self))]
      s = table[256 + Int(s) * classCount + Int(byteClass)]
      if s == reject { return reject }
      i += 1
    }
    return s
  }

  /// Length (2…4) of the well-formed multi-byte sequence at `p`, which has
  /// at least 4 readable bytes and a non-ASCII first byte; 0 if ill-formed.
  /// The second-byte ranges are those of RFC 3629 §4 (the automaton's
  /// afterE0 / afterED / afterF0 / afterF4 states).
  @inline(__always)
  static func sequenceLength(_ p: UnsafeRawPointer) -> Int {
    let b0 = p.load(as: UInt8.self)
    let b1 = p.load(fromByteOffset: 1, as: UInt8.self)
    switch b0 {
    case 0xC2...0xDF:
      return isContinuation(b1) ? 2 : 0
    case 0xE0...0xEF:
      let low: UInt8 = b0 == 0xE0 ? 0xA0 : 0x80
      let high: UInt8 = b0 == 0xED ? 0x9F : 0xBF
      guard b1 >= low && b1 <= high else { return 0 }
      return isContinuation(p.load(fromByteOffset: 2, as: UInt8.self)) ? 3 : 0
    case 0xF0...0xF4:
      let low: UInt8 = b0 == 0xF0 ? 0x90 : 0x80
      let high: UInt8 = b0 == 0xF4 ? 0x8F : 0xBF
      guard b1 >= low && b1 <= high else { return 0 }
      guard isContinuation(p.load(fromByteOffset: 2, as: UInt8.self)) else { return 0 }
      return isContinuation(p.load(fromByteOffset: 3, as: UInt8.self)) ? 4 : 0
    default:
      return 0  // stray continuation byte, C0/C1, F5…FF
    }
  }

  @inline(__always) static func isContinuation(_ byte: UInt8) -> Bool {
    byte & 0xC0 == 0x80
  }

  /// Whole-buffer check (close reasons): valid and complete.
  public static func isValid(_ bytes: UnsafeRawBufferPointer) -> Bool {
    var validator = UTF8Validator()
    return validator.feed(bytes) && validator.isComplete
  }

  /// Whole-array check.
  public static func isValid(_ bytes: [UInt8]) -> Bool {
    bytes.withUnsafeBytes { isValid($0) }
  }

  /// Fast path: returns the index of the first non-ASCII byte at or after
  /// `start` (or `count`), testing eight bytes per step.
  @inline(__always)
  static func skipASCII(_ base: UnsafeRawPointer, from start: Int, count: Int) -> Int {
    var i = start
    while i + 16 <= count {
      let word =
        base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
        | base.loadUnaligned(fromByteOffset: i + 8, as: UInt64.self)
      if word & 0x8080_8080_8080_8080 != 0 { break }
      i += 16
    }
    while i + 8 <= count {
      let word = base.loadUnaligned(fromByteOffset: i, as: UInt64.self)
      if word & 0x8080_8080_8080_8080 != 0 { break }
      i += 8
    }
    while i < count && base.load(fromByteOffset: i, as: UInt8.self) < 0x80 { i += 1 }
    return i
  }
}

extension UTF8Validator {
  /// Byte classes: what a byte can be, as far as the automaton cares.
  enum ByteClass: UInt8 {
    case ascii = 0  // 00..7F
    case cont80 = 1  // 80..8F
    case cont90 = 2  // 90..9F
    case contA0 = 3  // A0..BF
    case never = 4  // C0, C1, F5..FF: cannot appear in UTF-8 at all
    case lead2 = 5  // C2..DF
    case leadE0 = 6
    case lead3 = 7  // E1..EC, EE, EF
    case leadED = 8
    case leadF0 = 9
    case lead4 = 10  // F1..F3
    case leadF4 = 11
  }

  static func classify(_ byte: UInt8) -> ByteClass {
    switch byte {
    case 0x00...0x7F: return .ascii
    case 0x80...0x8F: return .cont80
    case 0x90...0x9F: return .cont90
    case 0xA0...0xBF: return .contA0
    case 0xC2...0xDF: return .lead2
    case 0xE0: return .leadE0
    case 0xED: return .leadED
    case 0xE1...0xEF: return .lead3
    case 0xF0: return .leadF0
    case 0xF1...0xF3: return .lead4
    case 0xF4: return .leadF4
    default: return .never
    }
  }

  /// The transition for one (state, class) pair; everything unlisted rejects.
  static func next(_ state: UInt8, _ byteClass: ByteClass) -> UInt8 {
    let isCont = byteClass == .cont80 || byteClass == .cont90 || byteClass == .contA0
    switch state {
    case accept:
      switch byteClass {
      case .ascii: return accept
      case .lead2: return tail1
      case .leadE0: return afterE0
      case .lead3: return tail2
      case .leadED: return afterED
      case .leadF0: return afterF0
      case .lead4: return tail3
      case .leadF4: return afterF4
      default: return reject
      }
    case tail1: return isCont ? accept : reject
    case tail2: return isCont ? tail1 : reject
    case tail3: return isCont ? tail2 : reject
    case afterE0: return byteClass == .contA0 ? tail1 : reject
    case afterED: return byteClass == .cont80 || byteClass == .cont90 ? tail1 : reject
    case afterF0: return byteClass == .cont90 || byteClass == .contA0 ? tail2 : reject
    case afterF4: return byteClass == .cont80 ? tail2 : reject
    default: return reject
    }
  }

  static func buildTable() -> [UInt8] {
    var table = [UInt8](repeating: reject, count: 256 + stateCount * classCount)
    for byte in 0...255 { table[byte] = classify(UInt8(byte)).rawValue }
    for state in 0..<stateCount {
      for rawClass in 0...ByteClass.leadF4.rawValue {
        let byteClass = ByteClass(rawValue: rawClass)!
        table[256 + state * classCount + Int(rawClass)] = next(UInt8(state), byteClass)
      }
    }
    return table
  }
}
