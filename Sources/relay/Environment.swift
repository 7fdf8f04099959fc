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
}

struct EnvError: Error, CustomStringConvertible {
  let flag: String
  let value: String
  var description: String { "environment value for --\(flag) is not a non-negative integer: \(value)" }
}

extension String {
  func replacingOccurrences(of a: Character, with b: Character) -> String {
    String(map { $0 == a ? b : $0 })
  }
}
