// The code-reading rules of tidy: function spans, imports, and the purity bans of
// the pure targets (DESIGN.md "Layers": no sockets, clocks, environment or unseeded
// randomness). All of them read `SourceText.codeLines`, where comments and string
// contents are already blank.

/// A function-like declaration with a body.
struct FunctionSpan: Equatable {
  let name: String
  let startLine: Int
  let endLine: Int
}

struct FunctionScanner {
  let lines: [[UInt8]]

  init(lines: [String]) {
    self.lines = lines.map { Array($0.utf8) }
  }

  static let keywords: Set<String> = ["func", "init", "deinit", "subscript"]
  /// A line starting with one of these ends a signature that had no body (a protocol
  /// requirement), before any `{` is reached.
  static let declarationStarts: Set<String> = [
    "func", "var", "let", "init", "deinit", "subscript", "case", "static", "class", "public", "private",
    "fileprivate", "internal", "package", "mutating", "nonmutating", "override", "typealias",
    "associatedtype", "struct", "enum", "protocol", "extension", "final", "#if", "#else", "#endif",
  ]

  func functions() -> [FunctionSpan] {
    var spans: [FunctionSpan] = []
    for (index, line) in lines.enumerated() {
      for (column, word) in Self.words(line) where Self.keywords.contains(word) {
        guard column == 0 || line[column - 1] != UInt8(ascii: "."),
          let (bodyLine, bodyColumn) = bodyStart(line: index, column: column + word.utf8.count),
          let end = closingBrace(line: bodyLine, column: bodyColumn)
        else { continue }
        spans.append(FunctionSpan(name: Self.name(line, after: column, keyword: word), startLine: index + 1, endLine: end + 1))
      }
    }
    return spans
  }

  /// Identifier-like words of a line with their columns.
  static func words(_ line: [UInt8]) -> [(Int, String)] {
    var result: [(Int, String)] = []
    var start: Int?
    for column in 0...line.count {
      let byte = column < line.count ? line[column] : UInt8(ascii: " ")
      let isWord = byte == UInt8(ascii: "_") || byte == UInt8(ascii: "#") || (byte >= 0x30 && byte <= 0x39)
        || (byte | 0x20 >= 0x61 && byte | 0x20 <= 0x7A) || byte >= 0x80
      if isWord, start == nil { start = column }
      if !isWord, let s = start {
        result.append((s, String(decoding: line[s..<column], as: UTF8.self)))
        start = nil
      }
    }
    return result
  }

  static func name(_ line: [UInt8], after column: Int, keyword: String) -> String {
    guard keyword == "func" else { return keyword }
    let rest = words(Array(line[column...])).dropFirst().first?.1
    return rest.map { "func \($0)" } ?? keyword
  }

  /// The `{` opening the body: the first one outside parentheses and brackets,
  /// unless a `}` or another declaration comes first.
  func bodyStart(line: Int, column: Int) -> (Int, Int)? {
    var depth = 0
    var (l, c) = (line, column)
    while l < lines.count {
      if c == 0, l != line, let first = Self.words(lines[l]).first,
        Self.declarationStarts.contains(first.1), depth == 0,
        lines[l][..<first.0].allSatisfy({ $0 == UInt8(ascii: " ") })
      {
        return nil
      }
      while c < lines[l].count {
        switch lines[l][c] {
        case UInt8(ascii: "("), UInt8(ascii: "["): depth += 1
        case UInt8(ascii: ")"), UInt8(ascii: "]"): depth -= 1
        case UInt8(ascii: "{") where depth == 0: return (l, c)
        case UInt8(ascii: "}") where depth == 0: return nil
        default: break
        }
        c += 1
      }
      (l, c) = (l + 1, 0)
    }
    return nil
  }

  func closingBrace(line: Int, column: Int) -> Int? {
    var depth = 0
    var (l, c) = (line, column)
    while l < lines.count {
      while c < lines[l].count {
        if lines[l][c] == UInt8(ascii: "{") { depth += 1 }
        if lines[l][c] == UInt8(ascii: "}") {
          depth -= 1
          if depth == 0 { return l }
        }
        c += 1
      }
      (l, c) = (l + 1, 0)
    }
    return nil
  }
}

/// One `import` line: `@testable import X`, `public import X`, `import struct X.Y`.
struct ImportLine: Equatable {
  let line: Int
  let module: String
}

enum Imports {
  static let modifiers: Set<String> = ["public", "internal", "package", "private", "fileprivate"]
  static let kinds: Set<String> = ["struct", "class", "enum", "protocol", "func", "var", "let", "typealias"]

  static func of(_ source: SourceText) -> [ImportLine] {
    source.codeLines.enumerated().compactMap { index, line in
      var tokens = line.split(whereSeparator: { $0 == " " || $0 == "\t" })[...]
      while let first = tokens.first, first.hasPrefix("@") || modifiers.contains(String(first)) {
        tokens = tokens.dropFirst()
      }
      guard tokens.first == "import", tokens.count >= 2 else { return nil }
      tokens = tokens.dropFirst()
      if let kind = tokens.first, kinds.contains(String(kind)), tokens.count >= 2 { tokens = tokens.dropFirst() }
      guard let path = tokens.first, let module = path.split(separator: ".").first else { return nil }
      return ImportLine(line: index + 1, module: String(module))
    }
  }
}

enum Purity {
  /// Names a pure target may not use (outside comments and strings): clocks, the
  /// environment, unseeded randomness, output.
  static let bannedNames: [String: String] = [
    "Date": "reads the wall clock", "ContinuousClock": "reads a clock", "SuspendingClock": "reads a clock",
    "clock_gettime": "reads a clock", "gettimeofday": "reads a clock", "DispatchTime": "reads a clock",
    "ProcessInfo": "reads the environment", "getenv": "reads the environment",
    "SystemRandomNumberGenerator": "uses unseeded randomness", "arc4random": "uses unseeded randomness",
    "arc4random_uniform": "uses unseeded randomness", "drand48": "uses unseeded randomness",
    "print": "writes to standard output",
  ]
  /// Methods that draw from the system generator unless given `using:`.
  static let randomMethods: Set<String> = ["random", "randomElement", "shuffled", "shuffle"]

  static func violations(path: String, source: SourceText) -> [Violation] {
    var found: [Violation] = []
    for (index, text) in source.codeLines.enumerated() {
      let line = Array(text.utf8)
      for (column, word) in FunctionScanner.words(line) {
        let afterDot = column > 0 && line[column - 1] == UInt8(ascii: ".")
        if let why = bannedNames[word], !afterDot {
          found.append(Violation(path: path, line: index + 1, rule: .impure, message: "\(why): `\(word)`"))
        } else if afterDot, randomMethods.contains(word), !callUsesGenerator(source.codeLines, index, column + word.utf8.count) {
          found.append(Violation(path: path, line: index + 1, rule: .impure, message: "uses unseeded randomness: `.\(word)(` without `using:`"))
        }
      }
    }
    return found
  }

  /// True when the call after a method name at (line, column) passes `using:`, or
  /// when the name is not called there (a reference to the method).
  static func callUsesGenerator(_ lines: [String], _ line: Int, _ column: Int) -> Bool {
    var depth = 0
    var arguments = ""
    for (offset, text) in lines[line...].prefix(8).enumerated() {
      for character in offset == 0 ? String(decoding: text.utf8.dropFirst(column), as: UTF8.self) : text {
        if depth == 0, character != "(" { return true }
        if character == "(" { depth += 1 }
        if character == ")" { depth -= 1 }
        arguments.append(character)
        if depth == 0 { return arguments.contains("using:") }
      }
    }
    return arguments.contains("using:")
  }
}
