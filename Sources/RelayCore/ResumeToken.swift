// A resume token as the core keeps it (§8). Production mints 24 random bytes as 32
// characters of URL-safe base64: as a String that is a separate ~80-byte heap block
// per connection. 32 such characters carry
// exactly 192 bits, so they pack losslessly into three words stored inline. Any other
// string (tests' seeded ids, a client's garbage) is kept as it is; the two forms never
// describe the same string, so equality and hashing stay exact.

enum ResumeToken: Hashable {
  case packed(UInt64, UInt64, UInt64)
  case text(String)

  private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  /// The 6-bit value of a URL-safe base64 character, or nil.
  private static func sextet(_ c: UInt8) -> UInt64? {
    switch c {
    case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt64(c - UInt8(ascii: "A"))
    case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt64(c - UInt8(ascii: "a") + 26)
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt64(c - UInt8(ascii: "0") + 52)
    case UInt8(ascii: "-"): return 62
    case UInt8(ascii: "_"): return 63
    default: return nil
    }
  }

  init(_ string: String) {
    self = Self.pack(string) ?? .text(string)
  }

  /// Character n becomes bits 186−6n ..< 192−6n of one 192-bit number (words.0 the
  /// most significant word). Runs at hello and resume only, so plain bit loops do.
  private static func pack(_ string: String) -> ResumeToken? {
    var words: (UInt64, UInt64, UInt64) = (0, 0, 0)
    var n = 0
    for c in string.utf8 {
      guard n < 32, let v = sextet(c) else { return nil }
      set(&words, v, at: 186 - 6 * n)
      n += 1
    }
    guard n == 32 else { return nil }
    return .packed(words.0, words.1, words.2)
  }

  /// ORs the 6-bit `value` into the 192-bit number (words.0 most significant) at `bit`.
  private static func set(_ words: inout (UInt64, UInt64, UInt64), _ value: UInt64, at bit: Int) {
    for k in 0..<6 where value & (1 << UInt64(k)) != 0 {
      let b = bit + k
      switch b / 64 {
      case 2: words.0 |= 1 << UInt64(b - 128)
      case 1: words.1 |= 1 << UInt64(b - 64)
      default: words.2 |= 1 << UInt64(b)
      }
    }
  }

  private static func get(_ words: (UInt64, UInt64, UInt64), at bit: Int) -> Int {
    var value = 0
    for k in 0..<6 {
      let b = bit + k
      let word: UInt64
      switch b / 64 {
      case 2: word = words.0 >> UInt64(b - 128)
      case 1: word = words.1 >> UInt64(b - 64)
      default: word = words.2 >> UInt64(b)
      }
      value |= Int(word & 1) << k
    }
    return value
  }

  /// The token as the client saw it in `welcome`.
  var string: String {
    switch self {
    case .text(let s): return s
    case .packed(let a, let b, let c):
      var chars: [UInt8] = []
      chars.reserveCapacity(32)
      for n in 0..<32 { chars.append(Self.alphabet[Self.get((a, b, c), at: 186 - 6 * n)]) }
      return String(decoding: chars, as: UTF8.self)
    }
  }
}
