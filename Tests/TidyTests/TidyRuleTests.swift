// tidy can fail: each rule is fed a synthetic source that breaks it (and one that
// stays just inside it) and must report exactly the break. The tree scan
// (TidyTreeTests) runs these same functions over the real sources.
import Testing

@Suite struct TidyRuleTests {
  /// A function of `lines` lines in total, declaration and closing brace included,
  /// with braces in a string and a comment that must not count.
  static func function(named name: String, lines: Int) -> String {
    let body = (0..<(lines - 2)).map { i in
      i == 0 ? #"  let brace = "}}{" // } {"# : "  _ = \(i)"
    }
    return (["func \(name)() {"] + body + ["}"]).joined(separator: "\n") + "\n"
  }

  @Test func aFunctionOf71LinesIsReported() {
    let text = Self.function(named: "long", lines: 71) + Self.function(named: "short", lines: 70)
    let found = Tidy.functionLengths(path: "X.swift", source: SourceText(text))
    #expect(found.map(\.message) == ["`func long` is 71 lines (limit 70)"])
    #expect(found.first?.line == 1)
  }

  @Test func functionsAreFoundWhereSwiftHasThem() {
    let text = """
      protocol P {
        func required()
        init(x: Int)
      }
      struct S {
        init?(a: Int,
              b: String) where T: Equatable {
          self.init()
          let s = "func fake() {"
        }
        deinit {}
        subscript(i: Int) -> Int { i }
        func outer() {
          func inner() { }
        }
      }
      """
    let spans = FunctionScanner(lines: SourceText(text).codeLines).functions()
    #expect(spans.map(\.name) == ["init", "deinit", "subscript", "func outer", "func inner"])
    #expect(spans.first == FunctionSpan(name: "init", startLine: 6, endLine: 10))
  }

  @Test func aFileOf501LinesIsReported() {
    let long = String(repeating: "let x = 1\n", count: 501)
    let limit = String(repeating: "let x = 1\n", count: 500)
    #expect(Tidy.fileLength(path: "Long.swift", text: long).map(\.message) == ["file is 501 lines (limit 500)"])
    #expect(Tidy.fileLength(path: "Limit.swift", text: limit).isEmpty)
  }

  @Test func aForbiddenImportInAPureTargetIsReported() throws {
    let text = """
      import RelayProtocol
      @preconcurrency import Foundation
      #if canImport(Glibc)
        import Glibc
      #endif
      let ok = "import Dispatch; Date()"  // import CLibUV, Date()
      """
    let rule = try #require(TidyTable.rules["RelayCore"])
    let found = TidyTargets.violations(target: "RelayCore", rule: rule, path: "Sources/RelayCore/X.swift", source: SourceText(text))
    #expect(found.map(\.line) == [2, 4])
    #expect(found.first?.message == "pure target RelayCore may not import Foundation (TidyTable.rules)")
  }

  @Test func clocksEnvironmentAndUnseededRandomnessAreReportedInPureTargets() throws {
    let text = """
      let now = Date()
      let home = ProcessInfo.processInfo.environment["HOME"]
      let a = Int.random(in: 0..<3)
      let b = Int.random(in: 0..<3, using: &generator)
      let c = items.randomElement()
      let d = items.shuffled(using: &generator)
      let e = clock.timeAt(x)  // ContinuousClock in a comment is fine
      """
    let rule = try #require(TidyTable.rules["RelayCluster"])
    let found = TidyTargets.violations(target: "RelayCluster", rule: rule, path: "X.swift", source: SourceText(text))
    #expect(found.map(\.line) == [1, 2, 3, 5])
    #expect(found.allSatisfy { $0.rule == .impure })
    let shell = try #require(TidyTable.rules["RelayServer"])
    #expect(TidyTargets.violations(target: "RelayServer", rule: shell, path: "X.swift", source: SourceText(text)).isEmpty)
  }

  @Test func importsAreReadInEveryForm() {
    let text = """
      @testable import RelayCore
      public import RelayProtocol
      import struct RelayWebSocket.CloseCode
      internal import Logging // import Fake
      let s = "import Nope"
      """
    #expect(Imports.of(SourceText(text)).map(\.module) == ["RelayCore", "RelayProtocol", "RelayWebSocket", "Logging"])
  }

  @Test func aTodoWithoutAnExistingOwnerFileIsReported() {
    let text = """
      // TODO: make this faster
      /// FIXME(docs/missing.md): nobody wrote this file
      // TODO(docs/cluster.md): owned, and docs/cluster.md exists
      // The TODO owners rule, and `TODO` in backticks, are prose.
      let s = "// TODO: in a string"
      """
    let found = Tidy.unownedTodos(path: "X.swift", source: SourceText(text)) { $0 == "docs/cluster.md" }
    #expect(found.map(\.line) == [1, 2])
    #expect(found.map(\.message) == [
      "TODO has no owner file; write `TODO(path/to/file): …`",
      "FIXME names docs/missing.md, which does not exist; write `FIXME(path/to/file): …`",
    ])
  }

  static let measurements = [
    "// Measured: 1.2 ms per turn with the heap.",
    "/// The old loop was 40 ms per tick.",
    "// A dictionary here is 3× slower than the table.",
    "// p99 rose from 1.5 to 2.2 ms at 5 000 records.",
    "// (about 300 connects/s here)",
    "// slows down (10-20 ms each near 20 000 connections)",
    "/// about 0.4 KiB per idle connection after a ramp of 19 900.",
    "// turns up to 100 ms at 20)",
    "/* before: 120 000 deliveries/s */",
  ]

  static let definitions = [
    "// RFC 6455 §5.2: the most significant bit of a 64-bit length must be 0.",
    "// §7: 10 raise/lower per 10 000 ms; §7a: 20 messages per 1 000 ms.",
    "let readBufferSize = 64 * 1024  // 64 KiB matches a typical socket receive batch",
    "/// The defaults: 500 ms to 20 s backoff, 10 s per attempt.",
    "/// (`Loop.nowMs`), measured from the cached loop time (`docs/src/timer.rst`).",
    "h.advance(800)  // first message was 1 000 ms ago",
    "/// 10 ms, not more: a longer budget stretches turns (Benchmarks/results/abuse.md).",
    "/// `turnBudgetMs`: a turn stays well under 50 ms (protocol/ §16), at most 64 KiB per read.",
  ]

  @Test(arguments: measurements)
  func aCommentCitingAMeasurementIsReported(_ line: String) {
    let found = Tidy.measurementComments(path: "X.swift", source: SourceText("let a = 1\n" + line + "\n"))
    #expect(found.count == 1, "not caught: \(line)")
    #expect(found.first?.line == 2)
  }

  @Test(arguments: definitions)
  func specCitationsAndDefinitionsAreNotMeasurements(_ line: String) {
    let found = Tidy.measurementComments(path: "X.swift", source: SourceText(line + "\n"))
    #expect(found.isEmpty, "false positive: \(found)")
  }

  static let manifest = """
    // swift-tools-version:6.0
    import PackageDescription
    let package = Package(
      name: "P",
      targets: [
        .systemLibrary(name: "CLib", pkgConfig: "lib"),
        .target(name: "Base"),
        .target(name: "Mid", dependencies: ["Base", "CLib"]),  // .target(name: "Ghost")
        .target(
          name: "Top",
          dependencies: [
            "Mid",
            .target(name: "Base", condition: .when(platforms: [.linux])),
            .product(name: "Logging", package: "swift-log"),
          ],
          path: "Custom/Top"),
        .testTarget(name: "TopTests", dependencies: ["Top"]),
        .plugin(name: "Gen", capability: .buildTool(), dependencies: ["Mid"]),
      ]
    )
    """

  @Test func packageSwiftIsParsed() {
    let targets = PackageManifest.targets(Self.manifest)
    #expect(targets.map(\.name) == ["CLib", "Base", "Mid", "Top", "TopTests", "Gen"])
    #expect(targets[3].dependencies == ["Mid", "Base"])
    #expect(targets[3].path == "Custom/Top" && targets[4].path == "Tests/TopTests")
    #expect(targets[2].line == 8)
  }

  @Test func aPackageDependencyMismatchIsReported() {
    let targets = PackageManifest.targets(Self.manifest)
    let imports: [String: Set<String>] = [
      "Base": [], "Mid": ["Base", "CLib"], "Top": ["Base", "Logging"], "TopTests": ["Top", "Mid"],
    ]
    let found = TidyTargets.dependencyDrift(manifestPath: "Package.swift", targets: targets, imports: imports)
    #expect(found.map(\.message) == [
      "Top declares Mid but does not import it",
      "TopTests imports Mid but does not declare it",
    ])
    let excused = TidyTargets.excusing(
      ["Top declares Mid but does not import it", "Base declares Gone but does not import it"], in: found, path: "T")
    #expect(excused.map(\.message) == [
      "TopTests imports Mid but does not declare it",
      "no longer true, remove it from TidyTable.knownDrift: Base declares Gone but does not import it",
    ])
  }

  @Test func stringsAndCommentsAreBlankedInCode() {
    let text = #"""
      let a = "x \(f("}")) y" /* { /* nested */ } */ + #"raw "quoted" {"# // {
      let b = """
        { multi "line" }
        """
      """#
    let source = SourceText(text)
    #expect(source.codeLines.joined().filter { $0 == "{" || $0 == "}" }.isEmpty)
    #expect(source.codeLines[0].contains("f("))
    #expect(source.comments.map(\.line) == [1, 1])
    #expect(source.codeLines.count == 4)
  }
}
