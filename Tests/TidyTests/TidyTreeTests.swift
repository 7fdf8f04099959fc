// tidy over this package's own tree (DESIGN.md "Style"; TigerBeetle's tidy.zig is
// the model: the linter is a test). Fails with the full list of violations.
import Foundation
import Testing

/// The package's Swift sources, read once.
struct SourceTree {
  let root: URL
  /// Path relative to the root → text.
  let files: [(path: String, text: String)]

  static let shared = SourceTree()

  init() {
    root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    var files: [(path: String, text: String)] = []
    for folder in TidyTable.scannedFolders {
      files += Self.swiftFiles(root: root, folder: folder)
    }
    self.files = files.sorted { $0.path < $1.path }
  }

  /// Swift files under `folder`, not following symbolic links nor entering hidden
  /// folders (a nested package's `.build` holds generated code).
  static func swiftFiles(root: URL, folder: String) -> [(path: String, text: String)] {
    let base = root.appendingPathComponent(folder)
    let keys: [URLResourceKey] = [.isSymbolicLinkKey, .isRegularFileKey]
    guard
      let walk = FileManager.default.enumerator(at: base, includingPropertiesForKeys: keys, options: [.skipsHiddenFiles])
    else { return [] }
    var found: [(path: String, text: String)] = []
    for case let url as URL in walk {
      let values = try? url.resourceValues(forKeys: Set(keys))
      if values?.isSymbolicLink == true {
        walk.skipDescendants()
        continue
      }
      guard url.pathExtension == "swift", values?.isRegularFile == true,
        let text = try? String(contentsOf: url, encoding: .utf8)
      else { continue }
      let relative = String(url.standardizedFileURL.path.dropFirst(root.standardizedFileURL.path.count + 1))
      found.append((relative, text))
    }
    return found
  }

  func exists(_ relative: String) -> Bool {
    FileManager.default.fileExists(atPath: root.appendingPathComponent(relative).path)
  }

  var manifest: String {
    (try? String(contentsOf: root.appendingPathComponent("Package.swift"), encoding: .utf8)) ?? ""
  }

  /// The target whose folder holds `path`, if any.
  func target(of path: String, among targets: [TargetDeclaration]) -> TargetDeclaration? {
    targets.filter { path.hasPrefix($0.path + "/") }.max { $0.path.count < $1.path.count }
  }
}

@Suite struct TidyTreeTests {
  let tree = SourceTree.shared

  static func report(_ violations: [Violation]) -> Comment {
    Comment(rawValue: "\(violations.count) violation(s):\n" + violations.map(\.description).joined(separator: "\n"))
  }

  @Test func sourcesAreFound() {
    #expect(tree.files.count > 100, "only \(tree.files.count) Swift files found under \(tree.root.path)")
    #expect(tree.files.contains { $0.path == "Tests/TidyTests/TidyTreeTests.swift" })
    #expect(!tree.files.contains { $0.path.hasPrefix("Fuzz/Sources/RelayCore/") }, "symbolic links are followed")
    // The function scanner finds the functions there are (over a thousand in Sources/).
    let spans = tree.files.filter { $0.path.hasPrefix("Sources/") }.flatMap {
      FunctionScanner(lines: SourceText($0.text).codeLines).functions().map { $0.endLine - $0.startLine + 1 }
    }
    #expect(spans.count > 1_000, "only \(spans.count) functions found in Sources/")
  }

  @Test func sizesStayUnderTheLimits() {
    var found: [Violation] = []
    for file in tree.files {
      found += Tidy.fileLength(path: file.path, text: file.text)
      found += Tidy.functionLengths(path: file.path, source: SourceText(file.text))
    }
    #expect(found.isEmpty, Self.report(found))
  }

  @Test func commentsFollowTheConventions() {
    var found: [Violation] = []
    for file in tree.files {
      let source = SourceText(file.text)
      found += Tidy.unownedTodos(path: file.path, source: source, fileExists: tree.exists)
      found += Tidy.measurementComments(path: file.path, source: source)
    }
    #expect(found.isEmpty, Self.report(found))
  }

  @Test func targetsImportOnlyWhatTheirLayerAllows() {
    let targets = PackageManifest.targets(tree.manifest)
    #expect(targets.contains { $0.name == "RelayCore" }, "Package.swift not parsed")
    var found: [Violation] = []
    var imports: [String: Set<String>] = [:]
    for file in tree.files {
      guard let target = tree.target(of: file.path, among: targets) else { continue }
      let source = SourceText(file.text)
      imports[target.name, default: []].formUnion(Imports.of(source).map(\.module))
      guard let rule = TidyTable.rule(for: target) else { continue }
      found += TidyTargets.violations(target: target.name, rule: rule, path: file.path, source: source)
    }
    for target in targets where imports[target.name] != nil && TidyTable.rule(for: target) == nil {
      found.append(
        Violation(
          path: "Package.swift", line: target.line, rule: .importNotAllowed,
          message: "\(target.name) has no entry in TidyTable.rules"))
    }
    let drift = TidyTargets.dependencyDrift(manifestPath: "Package.swift", targets: targets, imports: imports)
    found += TidyTargets.excusing(TidyTable.knownDrift, in: drift, path: "Tests/TidyTests/TidyTable.swift")
    #expect(found.isEmpty, Self.report(found))
  }

  @Test func everyPureTargetIsCovered() {
    let pure = TidyTable.rules.filter(\.value.pure).map(\.key)
    for name in ["RelayWebSocket", "RelayProtocol", "RelayCore", "RelayCluster", "RelayClientCore"] {
      #expect(pure.contains(name), "\(name) is not pure in TidyTable.rules")
    }
    let scanned = Set(tree.files.compactMap { $0.path.split(separator: "/").dropFirst().first.map(String.init) })
    for name in pure where tree.exists("Sources/\(name)") {
      #expect(scanned.contains(name), "\(name) has no Swift files scanned")
    }
  }
}
