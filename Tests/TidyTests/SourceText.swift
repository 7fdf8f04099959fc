// A Swift source split into what tidy reads: the code with comments and string
// contents blanked (so a brace, an import or a banned name inside a string or a
// comment never counts), and the comments with their line numbers. Not a parser:
// just enough lexing for line-based rules (The Swift Programming Language,
// "Lexical Structure": comments nest, strings may be raw `#"…"#` or multi-line and
// hold interpolations `\(…)` that are code again).

/// One line of comment text (after `//`, or a line of a `/* */` block), 1-based.
struct CommentLine: Equatable {
  let line: Int
  let text: String
}

struct SourceText {
  /// The code, line by line: comments and string literal contents are spaces, the
  /// quotes stay, so columns and line numbers match the original.
  let codeLines: [String]
  let comments: [CommentLine]

  init(_ text: String) {
    var lexer = Lexer(Array(text.utf8))
    lexer.run()
    codeLines = String(decoding: lexer.code, as: UTF8.self)
      .split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    comments = lexer.comments
  }
}

/// The lexer's state: a stack of contexts, because an interpolation inside a string
/// is code, which may hold another string.
private enum Context {
  case code(interpolationParens: Int?)
  case string(hashes: Int, multiline: Bool)
}

private struct Lexer {
  let bytes: [UInt8]
  var code: [UInt8] = []
  var comments: [CommentLine] = []
  var i = 0
  var line = 1
  var stack: [Context] = [.code(interpolationParens: nil)]

  init(_ bytes: [UInt8]) {
    self.bytes = bytes
    code.reserveCapacity(bytes.count)
  }

  func peek(_ offset: Int) -> UInt8? {
    i + offset < bytes.count ? bytes[i + offset] : nil
  }

  /// Copies (or blanks) one byte, keeping newlines so line numbers hold.
  mutating func take(blank: Bool) {
    let byte = bytes[i]
    if byte == UInt8(ascii: "\n") {
      line += 1
      code.append(byte)
    } else {
      code.append(blank ? UInt8(ascii: " ") : byte)
    }
    i += 1
  }

  mutating func run() {
    while i < bytes.count {
      switch stack[stack.count - 1] {
      case .code(let parens): lexCode(parens)
      case .string(let hashes, let multiline): lexString(hashes: hashes, multiline: multiline)
      }
    }
  }

  mutating func lexCode(_ parens: Int?) {
    let byte = bytes[i]
    if byte == UInt8(ascii: "/"), peek(1) == UInt8(ascii: "/") {
      return lineComment()
    }
    if byte == UInt8(ascii: "/"), peek(1) == UInt8(ascii: "*") {
      return blockComment()
    }
    if byte == UInt8(ascii: "#") || byte == UInt8(ascii: "\"") {
      var hashes = 0
      while peek(hashes) == UInt8(ascii: "#") { hashes += 1 }
      if peek(hashes) == UInt8(ascii: "\"") {
        let multiline = peek(hashes + 1) == UInt8(ascii: "\"") && peek(hashes + 2) == UInt8(ascii: "\"")
        for _ in 0..<(hashes + (multiline ? 3 : 1)) { take(blank: false) }
        stack.append(.string(hashes: hashes, multiline: multiline))
        return
      }
    }
    if let parens {
      if byte == UInt8(ascii: "(") {
        stack[stack.count - 1] = .code(interpolationParens: parens + 1)
      } else if byte == UInt8(ascii: ")") {
        if parens == 0 {
          stack.removeLast()  // back into the string
        } else {
          stack[stack.count - 1] = .code(interpolationParens: parens - 1)
        }
      }
    }
    take(blank: false)
  }

  mutating func lineComment() {
    let start = i + 2
    while i < bytes.count, bytes[i] != UInt8(ascii: "\n") { take(blank: true) }
    comments.append(CommentLine(line: line, text: String(decoding: bytes[start..<i], as: UTF8.self)))
  }

  /// `/* … */`, nested ones included; each line of it is a comment line.
  mutating func blockComment() {
    var depth = 0
    var start = i + 2
    take(blank: true)
    take(blank: true)
    depth = 1
    while i < bytes.count, depth > 0 {
      if bytes[i] == UInt8(ascii: "/"), peek(1) == UInt8(ascii: "*") {
        depth += 1
        take(blank: true)
      } else if bytes[i] == UInt8(ascii: "*"), peek(1) == UInt8(ascii: "/") {
        depth -= 1
        if depth == 0 {
          comments.append(CommentLine(line: line, text: String(decoding: bytes[start..<i], as: UTF8.self)))
        }
        take(blank: true)
      } else if bytes[i] == UInt8(ascii: "\n") {
        comments.append(CommentLine(line: line, text: String(decoding: bytes[start..<i], as: UTF8.self)))
        start = i + 1
      }
      take(blank: true)
    }
  }

  mutating func lexString(hashes: Int, multiline: Bool) {
    let byte = bytes[i]
    if byte == UInt8(ascii: "\\"), (0..<hashes).allSatisfy({ peek(1 + $0) == UInt8(ascii: "#") }) {
      for _ in 0...hashes { take(blank: true) }
      if peek(0) == UInt8(ascii: "(") {
        take(blank: false)
        stack.append(.code(interpolationParens: 0))
      } else if i < bytes.count {
        take(blank: true)  // the escaped character
      }
      return
    }
    let quotes = multiline ? 3 : 1
    if byte == UInt8(ascii: "\""),
      (0..<quotes).allSatisfy({ peek($0) == UInt8(ascii: "\"") }),
      (0..<hashes).allSatisfy({ peek(quotes + $0) == UInt8(ascii: "#") })
    {
      for _ in 0..<(quotes + hashes) { take(blank: false) }
      stack.removeLast()
      return
    }
    take(blank: true)
  }
}
