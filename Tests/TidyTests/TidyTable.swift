// What tidy checks where: the one table of allowed imports per target (the purity
// rule of DESIGN.md "Layers" lives here, once), the folders scanned, and the
// dependency drift the package had when tidy arrived. Edit this file, not the rules,
// when a target is added or its layer changes.

/// What one target may import, and whether it is pure.
struct TargetRule {
  /// Modules its sources may import; nil: anything (tests, test support).
  let imports: Set<String>?
  /// Pure targets also pass `Purity`: no clock, environment, unseeded randomness or output.
  let pure: Bool

  static func pure(_ imports: Set<String>) -> TargetRule { TargetRule(imports: imports, pure: true) }
  static func shell(_ imports: Set<String>) -> TargetRule { TargetRule(imports: imports, pure: false) }
  static let anything = TargetRule(imports: nil, pure: false)
}

enum TidyTable {
  /// The platform C library, under either name.
  static let libc: Set<String> = ["Glibc", "Darwin", "Musl"]

  /// Target → allowed imports. Pure targets import only pure targets below them (no
  /// Foundation, Dispatch, libc or C module); C modules only in EventLoop and
  /// RelayCrypto (DESIGN.md: unsafe C interop lives there and in CRelayShims).
  /// A target listed here but absent from the tree (RelayPrimitives on a branch
  /// without it) is fine; a Swift target of Package.swift missing here is reported.
  static let rules: [String: TargetRule] = [
    "RelayPrimitives": .pure([]),
    "RelayWebSocket": .pure(["RelayPrimitives"]),
    "RelayProtocol": .pure(["RelayPrimitives", "RelayWebSocket"]),
    "RelayCore": .pure(["RelayPrimitives", "RelayWebSocket", "RelayProtocol"]),
    "RelayCluster": .pure(["RelayPrimitives", "RelayWebSocket", "RelayProtocol", "RelayCore"]),
    "RelayClusterDriver": .pure(["RelayPrimitives"]),
    "RelayClientCore": .pure(["RelayPrimitives", "RelayWebSocket", "RelayProtocol"]),
    "RelayPush": .pure(["RelayPrimitives", "RelayWebSocket", "RelayProtocol", "RelayCore"]),

    "EventLoop": .shell(libc.union(["CLibUV", "CRelayShims", "RelayPrimitives"])),
    "RelayCrypto": .shell(
      libc.union(["COpenSSL", "CRelayShims", "RelayPrimitives"])),
    "OutboundHTTP": .shell(libc.union(["CLibCurl", "COpenSSL", "EventLoop", "RelayPrimitives"])),
    "RelayRedis": .shell(
      libc.union(["EventLoop", "RelayCrypto", "RelayCluster", "RelayClusterDriver", "RelayPrimitives", "Logging"])),
    "RelayClusterNode": .shell(
      libc.union([
        "EventLoop", "RelayCrypto", "RelayRedis", "RelayCluster", "RelayClusterDriver", "RelayCore", "RelayProtocol",
        "RelayPrimitives", "Logging",
      ])),
    "RelayServer": .shell(
      libc.union([
        "EventLoop", "RelayCrypto", "RelayPrimitives", "RelayWebSocket", "RelayProtocol", "RelayCore",
        "RelayCluster", "RelayClusterNode", "OutboundHTTP", "RelayPush", "Logging", "Metrics", "CoreMetrics", "Prometheus",
      ])),
    "RelayClient": .shell(
      libc.union([
        "RelayClientCore", "RelayPrimitives", "RelayWebSocket", "RelayProtocol", "EventLoop", "RelayCrypto",
        "Foundation", "FoundationNetworking", "Dispatch", "Observation", "Synchronization",
      ])),
    "relay": .shell(
      libc.union([
        "RelayServer", "RelayCrypto", "RelayCore", "RelayProtocol", "RelayWebSocket", "RelayPrimitives",
        "EventLoop", "ArgumentParser", "Logging", "RelayPush",
      ])),
    "relay-bots": .shell(
      libc.union([
        "RelayClientCore", "RelayPrimitives", "RelayProtocol", "RelayWebSocket", "RelayCrypto", "EventLoop",
        "ArgumentParser", "Histogram", "Foundation",
      ])),
    "relay-bench": .shell(
      libc.union([
        "RelayPrimitives", "RelayWebSocket", "RelayProtocol", "RelayCore", "RelayCluster", "EventLoop",
        "CAllocCounter",
      ])),
    "embed-demo": .shell(libc.union(["FoundationEssentials", "Foundation"])),
    "EmbedDemoPlugin": .shell(["PackagePlugin", "Foundation"]),
    "TestSupport": .anything,
  ]

  /// Test targets (kind `testTarget`) may import anything; their dependencies are
  /// still compared with their imports.
  static func rule(for target: TargetDeclaration) -> TargetRule? {
    target.kind == .testTarget ? .anything : rules[target.name]
  }

  /// Folders whose Swift files get the per-file rules (sizes, TODO owners,
  /// measurement comments), relative to the package root. Symbolic links are not
  /// followed (Fuzz/Sources links the pure targets' folders in again).
  static let scannedFolders = ["Sources", "Plugins", "Benchmarks", "Tests", "Fuzz/Sources", "Examples"]

  /// Accepted differences between Package.swift and the imports: none. An entry
  /// must still occur (one that no longer does is reported as stale), so a
  /// temporary exception cannot outlive its reason.
  static let knownDrift: Set<String> = []
}
