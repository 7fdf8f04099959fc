// Embeds the demo page and the JavaScript client into RelayServer at build time, so
// `relay serve` serves them at /demo from one self-contained binary and no generated
// copy is committed. The files are declared as inputs: editing any of them reruns
// the tool on the next build.
import Foundation
import PackagePlugin

@main
struct EmbedDemoPlugin: BuildToolPlugin {
  /// Served name (`/demo/<name>`) → file, relative to the package root. The client is
  /// served as-is, beside the page that imports it.
  static let assets: KeyValuePairs<String, String> = [
    "index.html": "demo/index.html",
    "demo.css": "demo/demo.css",
    "demo.js": "demo/demo.js",
    "relay-client.js": "clients/js/relay-client.js",
  ]

  func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
    let root = context.package.directoryURL
    let output = context.pluginWorkDirectoryURL.appending(path: "DemoAssets.swift")
    let inputs = Self.assets.map { root.appending(path: $0.value) }
    let pairs = zip(Self.assets, inputs).map { "\($0.0.key)=\($0.1.path(percentEncoded: false))" }
    return [
      .buildCommand(
        displayName: "Embedding the demo page and the JavaScript client",
        executable: try context.tool(named: "embed-demo").url,
        arguments: [output.path(percentEncoded: false)] + pairs,
        inputFiles: inputs,
        outputFiles: [output])
    ]
  }
}
