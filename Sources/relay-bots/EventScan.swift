// Fast path for the events the bots receive at high rates: session events
// (`message`, `hand.*`, `participant.*`) and echoed broadcast frames. It walks
// the top-level keys without building a value, picking out type, session,
// seq, from, uid, raisedAt, participant.uid and data.t; anything unusual
// (escapes in a picked string, bad syntax) returns nil and the caller falls
// back to the full parser.
//
// Why: with one core for up to a thousand bots, the full parser's
// allocations per delivery made the bots, not the server, the bottleneck.
// It reads the codec's borrowed payload in place (no copy, no reference
// counting per byte access), so a delivery costs no allocation at all.

#if canImport(Glibc)
  import Glibc
#endif

struct EventScan {
  var kind: EventKind?  // nil: no "type" key (a broadcast frame)
  var session: Range<Int>?
  var from: Range<Int>?
  var uid: Range<Int>?
  var seq: Int?
  var raisedAt: Double = 0
  var sentNs: UInt64?
  /// The session was matched as part of a known layout already.
  var sessionChecked = false

  /// Scans `{"k":v,...}`; nil when the bytes need the full parser. The
  /// ranges index into `b`, valid only while the caller still holds it.
  static func scan(_ b: UnsafeRawBufferPointer) -> EventScan? {
    var s = EventScan()
    var c = Cursor(b: b)
    guard c.eat(UInt8(ascii: "{")) else { return nil }
    if c.eat(UInt8(ascii: "}")) { return s }
    while true {
      guard let key = c.plainString(), c.eat(UInt8(ascii: ":")) else { return nil }
      guard s.take(key: key, &c) else { return nil }
      if c.eat(UInt8(ascii: ",")) { continue }
      return c.eat(UInt8(ascii: "}")) ? s : nil
    }
  }

  private mutating func take(key: Range<Int>, _ c: inout Cursor) -> Bool {
    switch c.key(key) {
    case .type:
      guard let v = c.plainString() else { return false }
      kind = c.eventKind(v)
      return true
    case .session: session = c.plainString(); return session != nil
    case .from: from = c.plainString(); return from != nil
    case .uid: uid = c.plainString(); return uid != nil
    case .seq: seq = c.integer().map { Int($0) }; return seq != nil
    case .raisedAt:
      guard let v = c.integer() else { return false }
      raisedAt = Double(v)
      return true
    case .data: return scanMembers(&c) { s, key, c in
        guard c.equals(key, "t"), let t = c.integer() else { return c.skipValue() }
        s.sentNs = t
        return true
      }
    case .participant: return scanMembers(&c) { s, key, c in
        guard c.equals(key, "uid") else { return c.skipValue() }
        s.uid = c.plainString()
        return s.uid != nil
      }
    case .other: return c.skipValue()
    }
  }

  /// Walks an object's members, handing each key to `member` (which must
  /// consume the value); a non-object value is skipped.
  private mutating func scanMembers(
    _ c: inout Cursor, _ member: (inout EventScan, Range<Int>, inout Cursor) -> Bool
  ) -> Bool {
    guard c.peek == UInt8(ascii: "{") else { return c.skipValue() }
    _ = c.eat(UInt8(ascii: "{"))
    if c.eat(UInt8(ascii: "}")) { return true }
    while true {
      guard let key = c.plainString(), c.eat(UInt8(ascii: ":")), member(&self, key, &c) else { return false }
      if c.eat(UInt8(ascii: ",")) { continue }
      return c.eat(UInt8(ascii: "}"))
    }
  }
}

/// The one event a fan-out run delivers a million times a second, matched
/// against the exact layout its sender writes: a fixed prefix compared in
/// one `memcmp`, then the few fields the checks need. Anything else (other
/// key order, whitespace, escapes, a different type or session) returns
/// nil and goes through `EventScan.scan`, which gives the same answer for
/// every layout, only slower. Why: the generic walk over every key cost the
/// bots about as much CPU per delivery as the relay spent producing it.
///
/// The prefix lives in memory of its own rather than an array, so matching
/// touches no reference count; the owner calls `deallocate()`.
struct MessageLayout {
  /// Everything before the first field that varies:
  /// relay `{"type":"message","session":"<s>","seq":`, broadcast `{"from":`.
  private let prefix: UnsafeMutableRawBufferPointer
  private let sessionRange: Range<Int>?

  private init(_ bytes: [UInt8], sessionRange: Range<Int>?) {
    prefix = .allocate(byteCount: bytes.count, alignment: 1)
    prefix.copyBytes(from: bytes)
    self.sessionRange = sessionRange
  }

  /// The relay's `message` event (PROTOCOL.md §7a) for `session`.
  static func relay(session: String) -> MessageLayout {
    let head = Array(#"{"type":"message","session":""#.utf8)
    let bytes = head + Array(session.utf8) + Array(#"","seq":"#.utf8)
    return MessageLayout(bytes, sessionRange: head.count..<(head.count + session.utf8.count))
  }

  /// A broadcast peer's echo of a bot's frame, `{"from":…,"data":{"t":…}}`.
  static func broadcast() -> MessageLayout { MessageLayout(Array(#"{"from":"#.utf8), sessionRange: nil) }

  func deallocate() { prefix.deallocate() }

  func match(_ b: UnsafeRawBufferPointer) -> EventScan? {
    let k = prefix.count
    guard b.count > k, b[b.count - 1] == UInt8(ascii: "}"), memcmp(b.baseAddress!, prefix.baseAddress!, k) == 0
    else { return nil }
    var i = k
    var s = EventScan()
    if let sessionRange {
      guard let seq = Self.digits(b, &i) else { return nil }
      s.kind = .message
      s.session = sessionRange
      s.sessionChecked = true
      s.seq = Int(seq)
      if Self.literal(#","ts":"#, b, &i) { guard Self.digits(b, &i) != nil else { return nil } }
      guard Self.literal(#","from":"#, b, &i) else { return nil }
    }
    guard b[i] == UInt8(ascii: "\"") else { return nil }
    let fromStart = i + 1
    i = fromStart
    while i < b.count, b[i] != UInt8(ascii: "\""), b[i] != UInt8(ascii: "\\") { i += 1 }
    guard i < b.count, b[i] == UInt8(ascii: "\"") else { return nil }
    s.from = fromStart..<i
    i += 1
    guard Self.literal(#","data":{"t":"#, b, &i), let t = Self.digits(b, &i) else { return nil }
    s.sentNs = t
    return s
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

/// A read position over the message bytes. Whitespace is allowed between
/// tokens, as JSON permits, though the relay writes compact JSON.
struct Cursor {
  let b: UnsafeRawBufferPointer
  var i = 0

  enum Key { case type, session, from, uid, seq, raisedAt, data, participant, other }

  var peek: UInt8? {
    mutating get {
      skipSpace()
      return i < b.count ? b[i] : nil
    }
  }

  mutating func skipSpace() {
    while i < b.count, b[i] == 0x20 || b[i] == 0x0A || b[i] == 0x0D || b[i] == 0x09 { i += 1 }
  }

  mutating func eat(_ ch: UInt8) -> Bool {
    skipSpace()
    guard i < b.count, b[i] == ch else { return false }
    i += 1
    return true
  }

  /// A string without escapes: the range of its content.
  mutating func plainString() -> Range<Int>? {
    guard eat(UInt8(ascii: "\"")) else { return nil }
    let start = i
    while i < b.count {
      let ch = b[i]
      if ch == UInt8(ascii: "\"") { i += 1; return start..<(i - 1) }
      if ch == UInt8(ascii: "\\") { return nil }
      i += 1
    }
    return nil
  }

  /// A non-negative integer (seq, hrtime stamps), at most 19 digits.
  mutating func integer() -> UInt64? {
    skipSpace()
    let start = i
    var v: UInt64 = 0
    while i < b.count, b[i] >= UInt8(ascii: "0"), b[i] <= UInt8(ascii: "9"), i - start < 19 {
      v = v * 10 + UInt64(b[i] - UInt8(ascii: "0"))
      i += 1
    }
    guard i > start, i == b.count || !isNumberTail(b[i]) else { return nil }
    return v
  }

  private func isNumberTail(_ ch: UInt8) -> Bool {
    ch == UInt8(ascii: ".") || ch == UInt8(ascii: "e") || ch == UInt8(ascii: "E")
      || (ch >= UInt8(ascii: "0") && ch <= UInt8(ascii: "9"))
  }

  /// Skips any value, nested or not, honouring strings and escapes.
  mutating func skipValue() -> Bool {
    skipSpace()
    var depth = 0
    var inString = false
    while i < b.count {
      let ch = b[i]
      i += 1
      if inString {
        if ch == UInt8(ascii: "\\") { i += 1 } else if ch == UInt8(ascii: "\"") { inString = false; if depth == 0 { return true } }
        continue
      }
      switch ch {
      case UInt8(ascii: "\""): inString = true
      case UInt8(ascii: "{"), UInt8(ascii: "["): depth += 1
      case UInt8(ascii: "}"), UInt8(ascii: "]"):
        if depth == 0 { i -= 1; return true }
        depth -= 1
        if depth == 0 { return true }
      case UInt8(ascii: ","): if depth == 0 { i -= 1; return true }
      default: break
      }
    }
    return false
  }

  func equals(_ r: Range<Int>, _ s: StaticString) -> Bool {
    guard r.count == s.utf8CodeUnitCount, let base = b.baseAddress else { return false }
    return memcmp(base + r.lowerBound, s.utf8Start, r.count) == 0
  }

  func equals(_ r: Range<Int>, _ bytes: [UInt8]) -> Bool { b.slice(r, equals: bytes) }

  /// Dispatches on the length first: most keys are then decided by one
  /// comparison instead of a walk through every candidate.
  func key(_ r: Range<Int>) -> Key {
    switch r.count {
    case 3:
      if equals(r, "seq") { return .seq }
      if equals(r, "uid") { return .uid }
    case 4:
      if equals(r, "type") { return .type }
      if equals(r, "from") { return .from }
      if equals(r, "data") { return .data }
    case 7: if equals(r, "session") { return .session }
    case 8: if equals(r, "raisedAt") { return .raisedAt }
    case 11: if equals(r, "participant") { return .participant }
    default: break
    }
    return .other
  }

  func eventKind(_ r: Range<Int>) -> EventKind {
    if equals(r, "message") { return .message }
    if equals(r, "hand.raised") { return .handRaised }
    if equals(r, "hand.lowered") { return .handLowered }
    if equals(r, "hands.cleared") { return .handsCleared }
    if equals(r, "participant.joined") { return .participantJoined }
    if equals(r, "participant.left") { return .participantLeft }
    if equals(r, "participant.lost") { return .participantLost }
    if equals(r, "participant.restored") { return .participantRestored }
    if equals(r, "participant.timed_out") { return .participantTimedOut }
    return .other
  }
}

extension UnsafeRawBufferPointer {
  /// Whether `self[range]` holds exactly `other`'s bytes.
  func slice(_ range: Range<Int>, equals other: [UInt8]) -> Bool {
    guard range.count == other.count, range.upperBound <= count else { return false }
    guard let base = baseAddress, !other.isEmpty else { return other.isEmpty }
    return other.withUnsafeBytes { memcmp(base + range.lowerBound, $0.baseAddress!, range.count) == 0 }
  }

  /// The bytes of `range` as a String (for the rare paths that keep one).
  func string(_ range: Range<Int>) -> String {
    String(decoding: UnsafeRawBufferPointer(rebasing: self[range]), as: UTF8.self)
  }
}
