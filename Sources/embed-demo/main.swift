// embed-demo: the build tool behind Plugins/EmbedDemoPlugin. Writes one Swift file
// holding each given file as a string literal, behind the API RelayServer serves
// /demo from (`DemoAssets.asset(named:)` → `DemoAsset`).
//
//   embed-demo <output.swift> <served-name>=<path> ...
//
// Each file becomes one multi-line raw string literal (#"""…"""#): it keeps the bytes
// exactly (UTF-8, LF line ends) and compiles fast.
#if canImport(FoundationEssentials)
  import FoundationEssentials  // Data and URL file I/O, without the rest of Foundation
#else
  import Foundation
#endif
#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// An ES module must come with a JavaScript MIME type or the browser refuses it.
let contentTypes = [
  "html": "text/html; charset=utf-8",
  "css": "text/css; charset=utf-8",
  "js": "text/javascript; charset=utf-8",
]

struct EmbedError: Error, CustomStringConvertible {
  let description: String
}

/// A Swift multi-line raw string literal whose value is exactly `text`.
func rawLiteral(_ text: String, source: String) throws -> String {
  // Swift normalises line ends inside a literal, so a CR would not survive.
  guard !text.utf8.contains(UInt8(ascii: "\r")) else {
    throw EmbedError(description: "\(source): CR found; use LF line ends only")
  }
  var hashes = "#"
  // Enough '#' that neither a closing delimiter nor an escape can occur inside.
  while text.contains("\"" + hashes) || text.contains("\\" + hashes) {
    hashes += "#"
  }
  // The newline just before the closing delimiter is not part of the value.
  return "\(hashes)\"\"\"\n\(text)\n\"\"\"\(hashes)"
}

/// `relay-client.js` → `relayClientJs`: a property name for a served name.
func propertyName(_ served: String) -> String {
  let parts = served.split(whereSeparator: { $0 == "-" || $0 == "." }).map(String.init)
  return parts[0] + parts.dropFirst().map { $0.prefix(1).uppercased() + $0.dropFirst() }.joined()
}

func generate(_ assets: [(served: String, path: String)]) throws -> String {
  var out = [
    "// Generated at build time by embed-demo (Plugins/EmbedDemoPlugin) from demo/ and",
    "// clients/js/relay-client.js. Not in the source tree: edit those files instead.",
    "",
    "/// One file of the demo page, served at `/demo/<name>`.",
    "struct DemoAsset {",
    "  let contentType: String",
    "  let text: String",
    "}",
    "",
    "enum DemoAssets {",
    "  /// The file served as `/demo/<name>`, or nil.",
    "  static func asset(named name: String) -> DemoAsset? {",
    "    switch name {",
  ]
  for (served, _) in assets {
    let ext = String(served.split(separator: ".").last ?? "")
    guard let type = contentTypes[ext] else {
      throw EmbedError(description: "\(served): no content type for .\(ext)")
    }
    out.append("    case \"\(served)\": DemoAsset(contentType: \"\(type)\", text: \(propertyName(served)))")
  }
  out += ["    default: nil", "    }", "  }"]
  for (served, path) in assets {
    let data = try Data(contentsOf: URL(fileURLWithPath: path))
    guard let text = String(data: data, encoding: .utf8) else {
      throw EmbedError(description: "\(path): not UTF-8")
    }
    out += ["", "  private static let \(propertyName(served)) = \(try rawLiteral(text, source: path))"]
  }
  out.append("}")
  return out.joined(separator: "\n") + "\n"
}

func main() throws {
  let args = CommandLine.arguments.dropFirst()
  guard let output = args.first, args.count > 1 else {
    throw EmbedError(description: "usage: embed-demo <output.swift> <served-name>=<path> ...")
  }
  let assets = try args.dropFirst().map { arg -> (served: String, path: String) in
    guard let eq = arg.firstIndex(of: "=") else { throw EmbedError(description: "\(arg): expected name=path") }
    return (String(arg[..<eq]), String(arg[arg.index(after: eq)...]))
  }
  let text = try generate(assets)
  // Unchanged output is not rewritten, so RelayServer is not recompiled for nothing.
  if let old = try? Data(contentsOf: URL(fileURLWithPath: output)), old == Data(text.utf8) { return }
  try Data(text.utf8).write(to: URL(fileURLWithPath: output), options: .atomic)
}

do {
  try main()
} catch {
  let message = Array("embed-demo: \(error)\n".utf8)
  _ = write(2, message, message.count)
  exit(1)
}
