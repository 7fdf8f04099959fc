// The grammar of an HTTP/1.x request head (RFC 7230 §3.1.1, §3.2), applied
// to a complete head. Stateless.

enum HTTPHeadSyntax {
  /// Parses "request-line CRLF *(header-field CRLF)" (the final empty line
  /// already removed).
  static func parseHead(_ head: UnsafeRawBufferPointer, bodyStart: Int) -> HTTPHeadParseResult {
    var lines = splitLines(head)
    guard !lines.isEmpty else { return .invalid(status: 400) }
    let requestLine = lines.removeFirst()
    if let status = requestLineStatus(requestLine) { return .invalid(status: status) }
    var headers: [(name: String, value: String)] = []
    headers.reserveCapacity(lines.count)
    for line in lines {
      guard let field = parseField(line) else { return .invalid(status: 400) }
      headers.append(field)
    }
    let parts = requestLine.split(separator: .space, omittingEmptySubsequences: false)
    let head = HTTPRequestHead(
      method: String(decoding: parts[0], as: UTF8.self),
      target: String(decoding: parts[1], as: UTF8.self),
      versionMinor: Int(parts[2].last! - UInt8(ascii: "0")),
      headers: headers)
    return .complete(head, bodyStart: bodyStart)
  }

  /// Splits CRLF-terminated lines; a bare CR or LF stays inside its line,
  /// where the character checks reject it.
  static func splitLines(_ head: UnsafeRawBufferPointer) -> [Slice<UnsafeRawBufferPointer>] {
    var lines: [Slice<UnsafeRawBufferPointer>] = []
    var lineStart = 0
    var i = 0
    while i + 1 < head.count {
      if head[i] == .cr && head[i + 1] == .lf {
        lines.append(head[lineStart..<i])
        i += 2
        lineStart = i
      } else {
        i += 1
      }
    }
    if lineStart < head.count { lines.append(head[lineStart..<head.count]) }
    return lines
  }

  /// nil if `line` is "method SP request-target SP HTTP-version" (§3.1.1),
  /// else the status to answer: 505 for a well-formed version other than
  /// HTTP/1.x, 400 for anything malformed.
  static func requestLineStatus<Bytes: Collection<UInt8>>(_ line: Bytes) -> Int? {
    let parts = line.split(separator: .space, omittingEmptySubsequences: false)
    guard parts.count == 3 else { return 400 }
    guard !parts[0].isEmpty, parts[0].allSatisfy(isTokenByte) else { return 400 }
    guard !parts[1].isEmpty, parts[1].allSatisfy({ (0x21...0x7E).contains($0) }) else {
      return 400
    }
    // HTTP-version = "HTTP/" DIGIT "." DIGIT (§2.6).
    let version = Array(parts[2])
    guard version.count == 8, version.starts(with: Array("HTTP/".utf8)),
      isDigit(version[5]), version[6] == UInt8(ascii: "."), isDigit(version[7])
    else { return 400 }
    return version[5] == UInt8(ascii: "1") ? nil : 505
  }

  /// header-field = field-name ":" OWS field-value OWS (§3.2). Rejects
  /// obs-fold (§3.2.4: a line starting with whitespace), whitespace before
  /// the colon (§3.2.4 says reject with 400), non-token names and control
  /// characters in values.
  static func parseField(_ line: Slice<UnsafeRawBufferPointer>) -> (name: String, value: String)? {
    guard let colon = line.firstIndex(of: .colon) else { return nil }
    let name = line[line.startIndex..<colon]
    guard !name.isEmpty, name.allSatisfy(isTokenByte) else { return nil }
    var value = line[(colon + 1)...]
    while let first = value.first, first == .space || first == .tab { value = value.dropFirst() }
    while let last = value.last, last == .space || last == .tab { value = value.dropLast() }
    guard value.allSatisfy(isFieldValueByte) else { return nil }
    return (String(decoding: name, as: UTF8.self), String(decoding: value, as: UTF8.self))
  }

  /// tchar (§3.2.6): "!#$%&'*+-.^_`|~", DIGIT, ALPHA.
  static func isTokenByte(_ byte: UInt8) -> Bool {
    switch byte {
    case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
      UInt8(ascii: "0")...UInt8(ascii: "9"):
      return true
    case UInt8(ascii: "!"), UInt8(ascii: "#"), UInt8(ascii: "$"), UInt8(ascii: "%"),
      UInt8(ascii: "&"), UInt8(ascii: "'"), UInt8(ascii: "*"), UInt8(ascii: "+"),
      UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "^"), UInt8(ascii: "_"),
      UInt8(ascii: "`"), UInt8(ascii: "|"), UInt8(ascii: "~"):
      return true
    default:
      return false
    }
  }

  /// field-vchar / SP / HTAB, obs-text allowed (§3.2): no CTLs, no DEL.
  static func isFieldValueByte(_ byte: UInt8) -> Bool {
    byte == .tab || (byte >= 0x20 && byte != 0x7F)
  }

  static func isDigit(_ byte: UInt8) -> Bool {
    byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9")
  }
}
