// Fast path for the events the bots receive at high rates: session events
// (`message`, `hand.*`, `participant.*`) and echoed broadcast frames. It walks
// the top-level keys without building a value, picking out type, session,
// seq, from, uid, raisedAt, participant.uid and data.t; anything unusual
// (escapes in a picked string, bad syntax) returns nil and the caller falls
// back to the full parser.
//
// Why: with one core for up to a thousand bots, the full parser's
// allocations per delivery made the bots, not the server, the bottleneck.

struct EventScan {
  var kind: EventKind?  // nil: no "type" key (a broadcast frame)
  var session: Range<Int>?
  var from: Range<Int>?
  var uid: Range<Int>?
  var seq: Int?
  var raisedAt: Double = 0
  var sentNs: UInt64?

  /// Scans `{"k":v,...}`; nil when the bytes need the full parser.
  static func scan(_ b: [UInt8]) -> EventScan? {
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

/// A read position over the message bytes. Whitespace is allowed between
/// tokens, as JSON permits, though the relay writes compact JSON.
struct Cursor {
  let b: [UInt8]
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
    guard r.count == s.utf8CodeUnitCount else { return false }
    let p = s.utf8Start
    for k in 0..<r.count where b[r.lowerBound + k] != p[k] { return false }
    return true
  }

  func equals(_ r: Range<Int>, _ bytes: [UInt8]) -> Bool {
    guard r.count == bytes.count else { return false }
    for k in 0..<r.count where b[r.lowerBound + k] != bytes[k] { return false }
    return true
  }

  func key(_ r: Range<Int>) -> Key {
    if equals(r, "type") { return .type }
    if equals(r, "session") { return .session }
    if equals(r, "seq") { return .seq }
    if equals(r, "from") { return .from }
    if equals(r, "uid") { return .uid }
    if equals(r, "data") { return .data }
    if equals(r, "raisedAt") { return .raisedAt }
    if equals(r, "participant") { return .participant }
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

extension [UInt8] {
  /// Whether `self[range]` holds exactly `other`'s bytes.
  func slice(_ range: Range<Int>, equals other: [UInt8]) -> Bool {
    guard range.count == other.count, range.upperBound <= count else { return false }
    for k in 0..<range.count where self[range.lowerBound + k] != other[k] { return false }
    return true
  }
}
