#if canImport(Glibc)
  import Glibc
#endif

/// Flags fall back to `RELAY_*` environment variables (e.g. `--max-bad-messages`
/// ← `RELAY_MAX_BAD_MESSAGES`); an explicit flag always wins.
enum Env {
  static func string(_ flag: String) -> String? {
    let name = "RELAY_" + flag.uppercased().replacingOccurrences(of: "-", with: "_")
    guard let raw = getenv(name) else { return nil }
    let value = String(cString: raw)
    return value.isEmpty ? nil : value
  }

  static func int(_ flag: String) throws -> Int? {
    guard let s = string(flag) else { return nil }
    guard let v = Int(s), v >= 0 else { throw EnvError(flag: flag, value: s) }
    return v
  }

  /// `1`/`true`/`yes`/`on` or `0`/`false`/`no`/`off`; nil when unset.
  static func bool(_ flag: String) throws -> Bool? {
    guard let s = string(flag) else { return nil }
    switch s.lowercased() {
    case "1", "true", "yes", "on": return true
    case "0", "false", "no", "off": return false
    default: throw EnvError(flag: flag, value: s, expected: "a boolean (1/0, true/false)")
    }
  }
}

struct EnvError: Error, CustomStringConvertible {
  let flag: String
  let value: String
  var expected = "a non-negative integer"
  var description: String { "environment value for --\(flag) is not \(expected): \(value)" }
}

extension String {
  func replacingOccurrences(of a: Character, with b: Character) -> String {
    String(map { $0 == a ? b : $0 })
  }
}
