// The bots' one fast path: the `message` event a fan-out run delivers a
// million times a second (and a broadcast peer's echo of a bot's frame),
// matched in place in the codec's borrowed payload, with no allocation and no
// JSON value. Everything else goes through RelayProtocol's parser and
// RelayClientCore's machine (Bot.swift). Why this one stays: without it the
// bots' core, not the relay, sets `make bench`'s fan-out figure
// (Benchmarks/results/bots-client-machine.md, "The one fast path").

#if canImport(Glibc)
  import Glibc
#endif

/// The fields of a matched message the checks need; ranges index into the
/// matched bytes, valid only while the caller still holds them.
struct MessageMatch {
  /// The session seq (relay); nil for a broadcast frame.
  var seq: Int?
  var from: Range<Int>
  /// `data.t`: the sender's hrtime stamp.
  var sentNs: UInt64
}

/// The one event a fan-out run delivers a million times a second, matched
/// against the exact layout its sender writes: a fixed prefix compared in
/// one `memcmp`, then the few fields the checks need. Anything else (other
/// key order, whitespace, escapes, a different type or session) returns
/// nil and goes through the full parser, which gives the same answer for
/// every layout, only slower.
///
/// The prefix lives in memory of its own rather than an array, so matching
/// touches no reference count; the owner calls `deallocate()`.
struct MessageLayout {
  /// Everything before the first field that varies:
  /// relay `{"type":"message","session":"<s>","seq":`, broadcast `{"from":`.
  private let prefix: UnsafeMutableRawBufferPointer
  /// The relay layout: a seq (and the session, inside the prefix) comes first.
  private let hasSeq: Bool

  private init(_ bytes: [UInt8], hasSeq: Bool) {
    prefix = .allocate(byteCount: bytes.count, alignment: 1)
    prefix.copyBytes(from: bytes)
    self.hasSeq = hasSeq
  }

  /// The relay's `message` event (PROTOCOL.md §7a) for `session`.
  static func relay(session: String) -> MessageLayout {
    let head = Array(#"{"type":"message","session":""#.utf8)
    let bytes = head + Array(session.utf8) + Array(#"","seq":"#.utf8)
    return MessageLayout(bytes, hasSeq: true)
  }

  /// A broadcast peer's echo of a bot's frame, `{"from":…,"data":{"t":…}}`.
  static func broadcast() -> MessageLayout { MessageLayout(Array(#"{"from":"#.utf8), hasSeq: false) }

  func deallocate() { prefix.deallocate() }

  func match(_ b: UnsafeRawBufferPointer) -> MessageMatch? {
    let k = prefix.count
    guard b.count > k, b[b.count - 1] == UInt8(ascii: "}"), memcmp(b.baseAddress!, prefix.baseAddress!, k) == 0
    else { return nil }
    var i = k
    var seq: Int?
    if hasSeq {
      guard let n = Self.digits(b, &i) else { return nil }
      seq = Int(n)
      if Self.literal(#","ts":"#, b, &i) { guard Self.digits(b, &i) != nil else { return nil } }
      guard Self.literal(#","from":"#, b, &i) else { return nil }
    }
    guard b[i] == UInt8(ascii: "\"") else { return nil }
    let fromStart = i + 1
    i = fromStart
    while i < b.count, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\") { i += 1 }
    guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
    let from = fromStart..<i
    i += 1
    guard Self.literal(#","data":{"t":"#, b, &i), let t = Self.digits(b, &i) else { return nil }
    return MessageMatch(seq: seq, from: from, sentNs: t)
  }

  /// 1 to 19 digits ended by `,` or `}` (the only ends these layouts have).
  @inline(__always)
  private static func digits(_ b: UnsafeRawBufferPointer, _ i: inout Int) -> UInt64? {
    let start = i
    let end = Swift.min(b.count, start + 19)
    var v: UInt64 = 0
    while i < end {
      let d = b[i] &- UInt8(ascii: "0")
      if d >= 10 { break }
      v = v &* 10 &+ UInt64(d)
      i += 1
    }
    guard i > start, i < b.count, b[i] == UInt8(ascii: ",") || b[i] == UInt8(ascii: "}") else { return nil }
    return v
  }

  @inline(__always)
  private static func literal(_ s: StaticString, _ b: UnsafeRawBufferPointer, _ i: inout Int) -> Bool {
    let n = s.utf8CodeUnitCount
    guard b.count - i >= n, memcmp(b.baseAddress! + i, s.utf8Start, n) == 0 else { return false }
    i += n
    return true
  }
}

extension UnsafeRawBufferPointer {
  /// Whether `self[range]` holds exactly `other`'s bytes.
  func slice(_ range: Range<Int>, equals other: [UInt8]) -> Bool {
    guard range.count == other.count, range.upperBound <= count else { return false }
    guard let base = baseAddress, !other.isEmpty else { return other.isEmpty }
    return other.withUnsafeBytes { memcmp(base + range.lowerBound, $0.baseAddress!, range.count) == 0 }
  }
}
