// The rules of tidy as pure functions of (path, text): the tree scan
// (TidyTreeTests) and the synthetic violations (TidyRuleTests) call the same code.
// Limits and conventions: DESIGN.md "Style"; the tables live in TidyTable.swift.
import Foundation

/// One broken rule at one place: `path:line: message`.
struct Violation: CustomStringConvertible, Equatable {
  enum Rule: String {
    case fileLength = "file-length"
    case functionLength = "function-length"
    case todo = "todo-owner"
    case measurement = "measurement-comment"
    case importNotAllowed = "import"
    case impure = "purity"
    case dependency = "package-dependency"
  }

  let path: String
  let line: Int
  let rule: Rule
  let message: String

  var description: String { "\(path):\(line): [\(rule.rawValue)] \(message)" }
}

enum Tidy {
  static let maxFileLines = 500
  static let maxFunctionLines = 70

  // MARK: Sizes

  static func fileLength(path: String, text: String) -> [Violation] {
    var count = text.utf8.reduce(0) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
    if !text.isEmpty, !text.hasSuffix("\n") { count += 1 }
    guard count > maxFileLines else { return [] }
    return [Violation(path: path, line: 1, rule: .fileLength, message: "file is \(count) lines (limit \(maxFileLines))")]
  }

  /// Every `func`, `init`, `deinit` and `subscript` with a body, counted from its
  /// declaration line through its closing brace.
  static func functionLengths(path: String, source: SourceText) -> [Violation] {
    FunctionScanner(lines: source.codeLines).functions().compactMap { f in
      let count = f.endLine - f.startLine + 1
      guard count > maxFunctionLines else { return nil }
      return Violation(
        path: path, line: f.startLine, rule: .functionLength,
        message: "`\(f.name)` is \(count) lines (limit \(maxFunctionLines))")
    }
  }

  // MARK: TODO owners

  /// A `TODO` or `FIXME` marker (one that opens the comment, or is followed by `:` or
  /// `(`) must name an owner file that exists, relative to the package root, the file
  /// that says why the work waits: `TODO(docs/cluster.md): …`. The words in prose or
  /// in backticks are not markers.
  static func unownedTodos(path: String, source: SourceText, fileExists: (String) -> Bool) -> [Violation] {
    source.comments.compactMap { comment in
      let text = withoutCodeSpans(comment.text)
      guard let match = todoPatterns.lazy.compactMap({ $0.firstMatch(in: text) }).first,
        let marker = match.group(1)
      else { return nil }
      let owner = match.group(2)
      if let owner, fileExists(owner) { return nil }
      let why = owner.map { "names \($0), which does not exist" } ?? "has no owner file"
      return Violation(
        path: path, line: comment.line, rule: .todo, message: "\(marker) \(why); write `\(marker)(path/to/file): …`")
    }
  }

  static let todoPatterns = [
    Pattern(#"^[/*!\s]*(TODO|FIXME)\b(?:\(([^)]*)\))?"#, caseInsensitive: false),
    Pattern(#"\b(TODO|FIXME)(?=[:(])(?:\(([^)]*)\))?"#, caseInsensitive: false),
  ]

  static func withoutCodeSpans(_ text: String) -> String {
    text.replacingOccurrences(of: #"`[^`]*`"#, with: "``", options: .regularExpression)
  }

  // MARK: Measurement comments

  /// Comments that cite a past measurement (figures belong in Benchmarks/results/).
  /// A sentence is flagged when it holds a quantity with a unit of time, size, rate
  /// or ratio AND a cue that the quantity was observed rather than defined: a
  /// measurement word (`measured`, `benchmark`, `p99`, `median`, `faster`, …), a
  /// history (`was 40 ms`, `rose from`, `before:`), or a workload it was seen under
  /// (`… here)`, `near 20 000 connections`, `after a ramp`, `… at 20)`). Spec
  /// citations (`RFC 6455 §5.2`, `§7: 10 per 10 000 ms`), definitions of constants
  /// and times in the past of a simulation (`1 000 ms ago`) have no cue.
  static func measurementComments(path: String, source: SourceText) -> [Violation] {
    commentSentences(source.comments).compactMap { sentence in
      let text = withoutCodeSpans(sentence.text)
      // A path (Benchmarks/results/abuse.md) is where figures live, not a cue.
      let prose = text.replacingOccurrences(of: #"[\w.-]+/[\w./-]+"#, with: "…", options: .regularExpression)
      guard let quantity = quantityPattern.firstMatch(in: text)?.group(0),
        let cue = cuePatterns.lazy.compactMap({ $0.firstMatch(in: prose)?.group(0) }).first
      else { return nil }
      return Violation(
        path: path, line: sentence.line, rule: .measurement,
        message: "comment cites a measurement (\"\(quantity)\" with \"\(cue)\"): say why, point at Benchmarks/results/")
    }
  }

  static let quantityPattern = Pattern(
    #"(?<![\w.§/])[~≈]?\d+(?:[ \u00A0\u202F,]\d{3})*(?:\.\d+)?(?:\s?[-–]\s?\d+(?:[ ,]\d{3})*(?:\.\d+)?)?"#
      + #"\s?(?:ns|µs|μs|us|ms|s|sec|seconds?|minutes?|%|×|x|B|bytes?|KB|KiB|MB|MiB|GB|GiB|[a-z]+/s|per second)(?![\w/])(?!\s+ago\b)"#)

  static let cuePatterns = [
    Pattern(
      #"\b(measured|measurements?|benchmark(s|ed)?|profiled|profiling|callgrind|observed|faster|slower|"#
        + #"speed-?ups?|regress(ed|ion)|improved|p50|p90|p95|p99|p999|median|throughput|on this machine)\b"#),
    Pattern(#"\b(was|were)\s+[~≈]?(about\s+)?\d"#),
    Pattern(#"\b(before|after):"#),
    Pattern(#"\b(rose|fell|dropped|went|cut)\s+(from|by)\b"#),
    Pattern(#"\bhere\s*[).,;]"#),
    Pattern(#"\b(after|during|under)\s+(a|an)\s+(ramp|run|load|storm|soak)\b"#),
    Pattern(#"\b(near|with)\s+[~≈]?\d[\d ,]*\s+(connections|bots|clients|members|sessions|users)\b"#),
    Pattern(#"\bat\s+\d[\d ,.]*\)"#),
  ]

  /// Comment lines joined into blocks (consecutive lines), then cut into sentences;
  /// each sentence carries the line it starts on.
  static func commentSentences(_ comments: [CommentLine]) -> [(line: Int, text: String)] {
    var sentences: [(line: Int, text: String)] = []
    var current = ""
    var startLine = 0
    var lastLine = -1
    for comment in comments {
      if comment.line != lastLine + 1, !current.isEmpty {
        sentences.append((startLine, current))
        current = ""
      }
      lastLine = comment.line
      let words = comment.text.drop(while: { $0 == "/" || $0 == "*" || $0 == " " })
      for piece in splitSentences(String(words)) {
        if current.isEmpty { startLine = comment.line }
        current += (current.isEmpty ? "" : " ") + piece.text
        if piece.ends {
          sentences.append((startLine, current))
          current = ""
        }
      }
    }
    if !current.isEmpty { sentences.append((startLine, current)) }
    return sentences
  }

  /// Pieces of one line, each marked when a sentence ends after it (". ", "; ", "? ").
  private static func splitSentences(_ line: String) -> [(text: String, ends: Bool)] {
    var pieces: [(String, Bool)] = []
    var rest = Substring(line)
    while let range = rest.range(of: #"[.;?!](\s|$)"#, options: .regularExpression) {
      pieces.append((String(rest[..<range.upperBound]), true))
      rest = rest[range.upperBound...]
    }
    if !rest.isEmpty { pieces.append((String(rest), false)) }
    return pieces
  }
}

/// NSRegularExpression behind a small API (fast on Linux, unlike a Swift `Regex`
/// over thousands of lines).
struct Pattern: @unchecked Sendable {
  let regex: NSRegularExpression

  init(_ pattern: String, caseInsensitive: Bool = true) {
    // A bad pattern is a bug in this file: every test fails at once, with the pattern.
    regex = try! NSRegularExpression(pattern: pattern, options: caseInsensitive ? [.caseInsensitive] : [])
  }

  struct Match {
    let text: NSString
    let result: NSTextCheckingResult

    func group(_ n: Int) -> String? {
      let range = result.range(at: n)
      return range.location == NSNotFound ? nil : text.substring(with: range)
    }
  }

  func firstMatch(in text: String) -> Match? {
    let ns = text as NSString
    return regex.firstMatch(in: text, range: NSRange(location: 0, length: ns.length)).map { Match(text: ns, result: $0) }
  }

  func matches(in text: String) -> [Match] {
    let ns = text as NSString
    return regex.matches(in: text, range: NSRange(location: 0, length: ns.length)).map { Match(text: ns, result: $0) }
  }
}
