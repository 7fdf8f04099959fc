// The per-target rules of tidy: imports against the table (TidyTable.rules), the
// purity bans of pure targets, and Package.swift's local dependencies against what
// each target's sources import.

enum TidyTargets {
  /// One file of `target`: imports outside its allow-list, and for a pure target
  /// every banned name.
  static func violations(target: String, rule: TargetRule, path: String, source: SourceText) -> [Violation] {
    var found: [Violation] = []
    if let allowed = rule.imports {
      for imported in Imports.of(source) where !allowed.contains(imported.module) && imported.module != target {
        let kind = rule.pure ? "pure target \(target)" : target
        found.append(
          Violation(
            path: path, line: imported.line, rule: .importNotAllowed,
            message: "\(kind) may not import \(imported.module) (TidyTable.rules)"))
      }
    }
    if rule.pure { found += Purity.violations(path: path, source: source) }
    return found
  }

  /// Each Swift target's local dependencies (targets of this package) against the
  /// local modules its sources import: declared and unused, imported and undeclared.
  /// `imports` holds, for each target with Swift sources, every module it imports.
  static func dependencyDrift(
    manifestPath: String, targets: [TargetDeclaration], imports: [String: Set<String>]
  ) -> [Violation] {
    let local = Set(targets.map(\.name))
    var found: [Violation] = []
    for target in targets where target.kind != .plugin {
      guard let imported = imports[target.name] else { continue }
      let declared = Set(target.dependencies).intersection(local)
      let used = imported.intersection(local).subtracting([target.name])
      for name in declared.subtracting(used).sorted() {
        found.append(
          Violation(
            path: manifestPath, line: target.line, rule: .dependency,
            message: "\(target.name) declares \(name) but does not import it"))
      }
      for name in used.subtracting(declared).sorted() {
        found.append(
          Violation(
            path: manifestPath, line: target.line, rule: .dependency,
            message: "\(target.name) imports \(name) but does not declare it"))
      }
    }
    return found
  }

  /// `found` without the entries of `known` (matched on the message), plus one
  /// violation for each entry of `known` that no longer occurs.
  static func excusing(_ known: Set<String>, in found: [Violation], path: String) -> [Violation] {
    let messages = Set(found.map(\.message))
    let stale = known.subtracting(messages).sorted().map {
      Violation(
        path: path, line: 1, rule: .dependency,
        message: "no longer true, remove it from TidyTable.knownDrift: \($0)")
    }
    return found.filter { !known.contains($0.message) } + stale
  }
}
