// Package.swift read just well enough to compare each target's declared local
// dependencies with what its sources import: the target calls and their `name:`,
// `path:` and `dependencies:` arguments. Dependencies are "X", .target(name: "X"),
// .target(name: "X", condition: …) and .byName(name: "X"); products are not local.
import Foundation

struct TargetDeclaration: Equatable {
  enum Kind: String {
    case target, executableTarget, testTarget, systemLibrary, plugin, binaryTarget, macro
  }

  let kind: Kind
  let name: String
  /// Line of its declaration in the manifest.
  let line: Int
  /// The sources' folder relative to the package root.
  let path: String
  /// Names from `dependencies:` that are not products (local targets, if any such target exists).
  let dependencies: [String]
}

enum PackageManifest {
  /// The target declarations of a manifest's text, in order.
  static func targets(_ manifest: String) -> [TargetDeclaration] {
    let code = SourceText(manifest).codeLines.joined(separator: "\n")
    let raw = Array(manifest.utf8)
    var found: [TargetDeclaration] = []
    let bytes = Array(code.utf8)
    var i = 0
    while i < bytes.count {
      guard bytes[i] == UInt8(ascii: "."), let kind = kindAt(bytes, i + 1) else {
        i += 1
        continue
      }
      let open = i + 1 + kind.rawValue.utf8.count
      let close = matching(bytes, open)
      // Arguments from the original text (the code view blanks string contents).
      let arguments = String(decoding: raw[open..<close], as: UTF8.self)
      let line = bytes[..<i].reduce(1) { $0 + ($1 == UInt8(ascii: "\n") ? 1 : 0) }
      if let declaration = declaration(kind, arguments, line: line) { found.append(declaration) }
      i = close
    }
    return found
  }

  /// The kind whose call `kind(` starts at `i`, if any.
  static func kindAt(_ bytes: [UInt8], _ i: Int) -> TargetDeclaration.Kind? {
    for kind in [TargetDeclaration.Kind.target, .executableTarget, .testTarget, .systemLibrary, .plugin, .binaryTarget, .macro] {
      let word = Array((kind.rawValue + "(").utf8)
      if i + word.count <= bytes.count, Array(bytes[i..<(i + word.count)]) == word { return kind }
    }
    return nil
  }

  /// Index just past the parenthesis matching the one at `open`.
  static func matching(_ bytes: [UInt8], _ open: Int) -> Int {
    var depth = 0
    var i = open
    while i < bytes.count {
      if bytes[i] == UInt8(ascii: "(") || bytes[i] == UInt8(ascii: "[") { depth += 1 }
      if bytes[i] == UInt8(ascii: ")") || bytes[i] == UInt8(ascii: "]") {
        depth -= 1
        if depth == 0 { return i + 1 }
      }
      i += 1
    }
    return bytes.count
  }

  static func declaration(_ kind: TargetDeclaration.Kind, _ arguments: String, line: Int) -> TargetDeclaration? {
    guard let name = stringArgument("name", arguments) else { return nil }
    let folder = kind == .testTarget ? "Tests" : (kind == .plugin ? "Plugins" : "Sources")
    return TargetDeclaration(
      kind: kind, name: name, line: line, path: stringArgument("path", arguments) ?? "\(folder)/\(name)",
      dependencies: dependencies(arguments))
  }

  static func stringArgument(_ label: String, _ arguments: String) -> String? {
    // The first `name:` is the target's own: a dependency's comes later.
    Pattern(#"\b"# + label + #":\s*"([^"]+)""#, caseInsensitive: false).firstMatch(in: arguments)?.group(1)
  }

  /// The `dependencies: [ … ]` list without its products.
  static func dependencies(_ arguments: String) -> [String] {
    guard let start = arguments.range(of: "dependencies:") else { return [] }
    let tail = Array(arguments[start.upperBound...].utf8)
    guard let open = tail.firstIndex(of: UInt8(ascii: "[")) else { return [] }
    let list = String(decoding: tail[open..<matching(tail, open)], as: UTF8.self)
    let withoutProducts = list.replacingOccurrences(of: #"\.product\([^)]*\)"#, with: "", options: .regularExpression)
    return Pattern(#""([^"]+)""#, caseInsensitive: false).matches(in: withoutProducts).compactMap { $0.group(1) }
  }
}
