// Incremental HTTP/1.x request-head parser (RFC 7230 §3) with a size limit.
// Strict by design: this port faces the internet, so anything the RFC lets a
// server reject is rejected (obs-fold, whitespace before ":", bare CR/LF,
// control characters), which closes request-smuggling ambiguities.

/// The outcome of feeding bytes to an `HTTPHeadParser`.
public enum HTTPHeadParseResult: Sendable {
  /// The head is not complete yet.
  case needMore
  /// The head ended at `bodyStart` of the parser's accumulated bytes.
  case complete(HTTPRequestHead, bodyStart: Int)
  /// Respond with `status` and close: 400 malformed, 431 too large,
  /// 505 unsupported HTTP major version.
  case invalid(status: Int)
}

/// Accumulates bytes until a complete request head ("\r\n\r\n") arrives.
/// After `.complete` or `.invalid`, later feeds return the same result
/// (bytes fed after completion are added to `leftover`).
public struct HTTPHeadParser {
  /// The head, terminator and any leading empty lines included, must fit.
  public let maxHeadBytes: Int
  var buffer: [UInt8] = []
  /// Start of the request-line, after skipped leading empty lines.
  var headStart = 0
  /// Where the search for "\r\n\r\n" resumes.
  var scanFrom = 0
  var requestLineChecked = false
  /// How far the incomplete request-line has been screened already.
  var requestLineScan = 0
  var outcome: HTTPHeadParseResult?

  public init(maxHeadBytes: Int = 8192) {
    self.maxHeadBytes = maxHeadBytes
  }

  /// The bytes after the head (frames sent right behind an upgrade request,
  /// the start of a body); empty until the head is complete.
  public var leftover: [UInt8] {
    guard case .complete(_, let bodyStart)? = outcome else { return [] }
    return Array(buffer[bodyStart...])
  }

  /// Adds bytes and reports whether the head is complete, invalid, or not
  /// yet either.
  public mutating func feed(_ bytes: UnsafeRawBufferPointer) -> HTTPHeadParseResult {
    if let outcome {
      if case .complete = outcome { buffer.append(contentsOf: bytes) }
      return outcome
    }
    buffer.append(contentsOf: bytes)
    let result = advance()
    if case .needMore = result { return result }
    outcome = result
    return result
  }

  /// Array convenience for `feed(_:)`.
  public mutating func feed(_ bytes: [UInt8]) -> HTTPHeadParseResult {
    bytes.withUnsafeBytes { feed($0) }
  }

  /// Forgets the current request, keeping its leftover bytes as the start
  /// of the next one (HTTP/1.1 persistent connections, RFC 7230 §6.3).
  public mutating func reset(keepingLeftover: Bool = true) {
    let carried = keepingLeftover ? leftover : []
    self = HTTPHeadParser(maxHeadBytes: maxHeadBytes)
    buffer = carried
  }

  mutating func advance() -> HTTPHeadParseResult {
    // RFC 7230 §3.5: ignore empty lines received before the request-line.
    while headStart + 1 < buffer.count && buffer[headStart] == .cr
      && buffer[headStart + 1] == .lf
    {
      headStart += 2
    }
    if !requestLineChecked, let early = checkRequestLine() { return early }
    if let end = findHeadEnd() {
      guard end <= maxHeadBytes else { return .invalid(status: 431) }
      let start = headStart
      // The block handed over is every line with its CRLF, minus the final
      // empty line.
      return buffer.withUnsafeBytes { raw in
        HTTPHeadSyntax.parseHead(
          UnsafeRawBufferPointer(rebasing: raw[start..<end - 2]), bodyStart: end)
      }
    }
    return buffer.count > maxHeadBytes ? .invalid(status: 431) : .needMore
  }

  /// Rejects garbage as soon as it shows: once the request-line is complete
  /// it is checked whole; before that, any byte a request-line cannot hold
  /// (a TLS ClientHello, binary noise) fails at once. Nil = no verdict yet.
  mutating func checkRequestLine() -> HTTPHeadParseResult? {
    var i = Swift.max(requestLineScan, headStart)
    while i < buffer.count {
      let byte = buffer[i]
      if byte == .cr {
        guard i + 1 < buffer.count else {
          requestLineScan = i
          return nil
        }
        guard buffer[i + 1] == .lf else { return .invalid(status: 400) }
        requestLineChecked = true
        let status = buffer.withUnsafeBytes {
          HTTPHeadSyntax.requestLineStatus(UnsafeRawBufferPointer(rebasing: $0[headStart..<i]))
        }
        return status.map { .invalid(status: $0) }
      }
      if byte != .space && !(0x21...0x7E).contains(byte) { return .invalid(status: 400) }
      i += 1
    }
    requestLineScan = i
    return nil
  }

  /// Index just past "\r\n\r\n", searching only bytes not searched before.
  mutating func findHeadEnd() -> Int? {
    var i = Swift.max(scanFrom, headStart)
    while i + 3 < buffer.count {
      if buffer[i] == .cr && buffer[i + 1] == .lf && buffer[i + 2] == .cr
        && buffer[i + 3] == .lf
      {
        return i + 4
      }
      i += 1
    }
    scanFrom = i
    return nil
  }
}

extension UInt8 {
  static let cr = UInt8(ascii: "\r")
  static let lf = UInt8(ascii: "\n")
  static let space = UInt8(ascii: " ")
  static let tab = UInt8(ascii: "\t")
  static let colon = UInt8(ascii: ":")
}
