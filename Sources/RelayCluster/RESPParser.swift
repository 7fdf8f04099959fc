// The incremental RESP2 reply parser. Redis replies are untrusted input (DESIGN.md,
// "Limits and failures"): a reply arriving in many reads is parsed once, not again
// from its start at every read; a count read from the wire never sizes an
// allocation; and nesting, lengths and lines are bounded, so a corrupt or hostile
// stream becomes a `RESPError` (the caller drops the connection), never a trap,
// a deep recursion or an unbounded buffer.
//
// The spec (https://redis.io/docs/latest/develop/reference/protocol-spec/) frames
// every value with a type byte and a header line ending in CRLF; a bulk string's
// header gives its byte length, an array's its element count, and the elements
// follow as complete values. So the parser keeps, between feeds: the offset already
// searched for the CRLF of the pending header line, the length of a bulk string
// whose header was read, and a stack of the arrays still being filled.

/// Incremental reply parser: `feed` bytes as they arrive, then `next()` until nil.
/// After `next()` throws, the stream is unusable (the framing is lost): drop the
/// connection.
import RelayPrimitives

public struct RESPParser {
  /// An array whose header was read, waiting for `remaining` more elements.
  private struct OpenArray {
    var remaining: Int
    var items: [RESPValue]
  }

  /// Longest simple-string or error line (type byte and CRLF excluded). Redis's
  /// status and error replies are short messages; without a bound, a stream that
  /// never sends CRLF would grow the buffer forever.
  public static let maxLineLength = 64 * 1024
  /// Longest integer or length line: a sign and the 19 digits of an Int64.
  static let maxNumberLength = 20
  /// Elements reserved up front for an array, whatever its declared count: the
  /// count comes from the wire, so storage grows only as elements actually arrive.
  static let reservedElements = 16
  /// A buffer larger than this is released, not kept, once fully consumed, so one
  /// large reply does not pin its memory for the life of the connection.
  static let retainedBufferBytes = 1024 * 1024

  /// Largest bulk string (bytes) and array (elements) accepted, and the largest reply
  /// in wire bytes (plus room for the framing of a bulk string of `maxLength`).
  public let maxLength: Int
  /// Deepest nesting of arrays accepted. Relay's deepest reply, XREAD's
  /// streams → [key, entries] → entries → [id, fields] → fields, nests 5.
  public let maxDepth: Int

  /// Bytes received and not yet consumed.
  private var buffer = FIFOQueue<UInt8>(retainedCapacity: retainedBufferBytes)
  /// Bytes after the first already searched for the pending header line's CRLF.
  private var scanned = 0
  /// Length of the bulk string whose header was consumed and whose bytes (and CRLF)
  /// start the buffer.
  private var pendingBulk: Int?
  /// Arrays of the reply in progress, outermost first.
  private var open: [OpenArray] = []
  /// The error `next()` threw: the framing is lost for good.
  private var failure: RESPError?
  /// Wire bytes of the reply in progress, counted as they are consumed.
  private var replyBytes = 0
  /// Bytes examined or copied so far, over all feeds: tests assert that parsing is
  /// linear in the input however it is split.
  internal private(set) var steps = 0

  /// A parser accepting bulk strings and arrays of up to `maxLength` bytes or
  /// elements, nested at most `maxDepth` deep.
  public init(maxLength: Int = 512 * 1024 * 1024, maxDepth: Int = 8) {
    precondition((0...(Int.max / 2)).contains(maxLength) && maxDepth >= 1, "RESPParser limits out of range")
    self.maxLength = maxLength
    self.maxDepth = maxDepth
  }

  /// Appends received bytes; call `next()` until it returns nil afterwards.
  public mutating func feed<C: Collection>(_ bytes: C) where C.Element == UInt8 {
    // The queue moves at most as many bytes as were consumed since its last move:
    // linear, however the stream is split.
    buffer.append(contentsOf: bytes)
  }

  /// The next complete reply, nil if more bytes are needed. Once it has thrown, it
  /// throws the same error again.
  public mutating func next() throws(RESPError) -> RESPValue? {
    if let failure { throw failure }
    do {
      return try parseNext()
    } catch {
      failure = error
      throw error
    }
  }

  private mutating func parseNext() throws(RESPError) -> RESPValue? {
    while true {
      if let length = pendingBulk {
        guard let bytes = try bulkBody(length) else { return nil }
        pendingBulk = nil
        if let reply = complete(.bulk(bytes)) { return reply }
        continue
      }
      guard let (kind, line) = try headerLine() else { return nil }
      if let value = try value(kind: kind, line: line), let reply = complete(value) {
        return reply
      }
    }
  }

  /// The bytes of the pending bulk string once they and their CRLF have arrived.
  private mutating func bulkBody(_ length: Int) throws(RESPError) -> [UInt8]? {
    guard buffer.count >= length + 2 else { return nil }
    guard buffer[length] == 13, buffer[length + 1] == 10 else {
      throw RESPError(message: "bulk string not followed by CRLF")
    }
    let bytes = Array(buffer.elements.prefix(length))
    steps += length + 2
    buffer.removeFirst(length + 2)
    return bytes
  }

  /// The type byte and the rest of the next header line, consumed; nil if its CRLF
  /// has not arrived. Each byte is searched once (a CR at the end of the buffer
  /// twice), however the line is split across feeds.
  private mutating func headerLine() throws(RESPError) -> (UInt8, ArraySlice<UInt8>)? {
    guard let kind = buffer.first else { return nil }
    let limit: Int
    switch kind {
    case UInt8(ascii: "+"), UInt8(ascii: "-"): limit = Self.maxLineLength
    case UInt8(ascii: ":"), UInt8(ascii: "$"), UInt8(ascii: "*"): limit = Self.maxNumberLength
    default: throw RESPError(message: "unknown reply type byte \(kind)")
    }
    // The CR may be at most at 1 + limit; its LF is one byte further.
    let searchEnd = min(buffer.count - 1, 2 + limit)
    var j = 1 + scanned
    while j < searchEnd {
      steps += 1
      if buffer[j] == 13, buffer[j + 1] == 10 {
        let line = buffer.elements.dropFirst().prefix(j - 1)
        try count(j + 2)
        buffer.removeFirst(j + 2)
        scanned = 0
        return (kind, line)
      }
      j += 1
    }
    scanned = j - 1
    if buffer.count >= limit + 3 { throw RESPError(message: "reply header line too long") }
    return nil
  }

  /// Adds consumed wire bytes to the reply in progress, within its bound.
  private mutating func count(_ bytes: Int) throws(RESPError) {
    replyBytes += bytes
    // 64 bytes cover the header and CRLFs of a bulk string of exactly `maxLength`.
    guard replyBytes <= maxLength + 64 else { throw RESPError(message: "reply too long") }
  }

  /// The value a header line starts: a complete scalar, or nil after opening an
  /// array or a bulk string whose contents follow.
  private mutating func value(kind: UInt8, line: ArraySlice<UInt8>) throws(RESPError) -> RESPValue? {
    switch kind {
    case UInt8(ascii: "+"): return .simple(String(decoding: line, as: UTF8.self))
    case UInt8(ascii: "-"): return .error(String(decoding: line, as: UTF8.self))
    case UInt8(ascii: ":"): return .integer(try Self.integer(line))
    case UInt8(ascii: "$"):
      guard let length = try self.length(line, of: "bulk string") else { return .bulk(nil) }
      try count(length + 2)
      pendingBulk = length
      return nil
    default:
      // An array's depth counts even when it is empty or null, so the bound does
      // not depend on what the innermost array holds.
      guard open.count < maxDepth else { throw RESPError(message: "arrays nested too deep") }
      guard let elements = try length(line, of: "array") else { return .array(nil) }
      if elements == 0 { return .array([]) }
      var items: [RESPValue] = []
      items.reserveCapacity(min(elements, Self.reservedElements))
      open.append(OpenArray(remaining: elements, items: items))
      return nil
    }
  }

  /// A bulk string's or array's declared size: nil for the null value (-1, the only
  /// negative size RESP2 defines), else within `maxLength`.
  private func length(_ line: ArraySlice<UInt8>, of what: String) throws(RESPError) -> Int? {
    let n = try Self.integer(line)
    if n == -1 { return nil }
    guard n >= 0 else { throw RESPError(message: "negative \(what) length") }
    guard n <= Int64(maxLength) else { throw RESPError(message: "\(what) too long") }
    return Int(n)  // in range: n <= maxLength, an Int
  }

  /// Adds a finished value to the innermost open array, closing every array it
  /// completes; returns the reply once no array is left open.
  private mutating func complete(_ value: RESPValue) -> RESPValue? {
    var value = value
    while !open.isEmpty {
      let last = open.count - 1
      open[last].items.append(value)
      open[last].remaining -= 1
      if open[last].remaining > 0 { return nil }
      value = .array(open.removeLast().items)
    }
    replyBytes = 0
    return value
  }

  /// A signed decimal integer (`:[<+|->]<digits>`), without overflow.
  static func integer(_ digits: ArraySlice<UInt8>) throws(RESPError) -> Int64 {
    var rest = digits[...]
    var negative = false
    if let sign = rest.first, sign == UInt8(ascii: "-") || sign == UInt8(ascii: "+") {
      negative = sign == UInt8(ascii: "-")
      rest = rest.dropFirst()
    }
    guard !rest.isEmpty else { throw RESPError(message: "bad integer in reply") }
    var value: Int64 = 0
    for byte in rest {
      guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9") else {
        throw RESPError(message: "bad integer in reply")
      }
      let digit = Int64(byte - UInt8(ascii: "0"))
      // Accumulate negatively: Int64.min has no positive counterpart.
      let (times10, o1) = value.multipliedReportingOverflow(by: 10)
      let (next, o2) = times10.subtractingReportingOverflow(digit)
      guard !o1, !o2 else { throw RESPError(message: "integer out of range in reply") }
      value = next
    }
    if negative { return value }
    guard value != Int64.min else { throw RESPError(message: "integer out of range in reply") }
    return -value
  }
}
