// swift-tools-version:6.0
import PackageDescription

// One settings block for every Swift target (DESIGN.md, "Style").
let strict: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("InternalImportsByDefault"),
]

// Release builds of the relay's own modules skip Swift's dynamic exclusivity checks:
// on the fan-out path they cost more than the dictionary lookup (a thread-local
// access set for every class-property modify; figures in Benchmarks/results/).
// Everything runs on the one loop thread; debug builds, which the tests use, keep
// the checks, so an overlapping access still fails there.
let hot: [SwiftSetting] = strict + [
  .unsafeFlags(["-enforce-exclusivity=unchecked"], .when(configuration: .release))
]

let package = Package(
  name: "Relay",
  platforms: [.macOS(.v14)],
  products: [
    .executable(name: "relay", targets: ["relay"]),
    .executable(name: "relay-bots", targets: ["relay-bots"]),
    .library(name: "RelayClient", targets: ["RelayClient"]),
  ],
  dependencies: [
    .package(url: "https://github.com/apple/swift-argument-parser", from: "1.5.0"),
    .package(url: "https://github.com/apple/swift-log", from: "1.6.0"),
    .package(url: "https://github.com/apple/swift-metrics", from: "2.5.0"),
    .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.0.0"),
    .package(url: "https://github.com/HdrHistogram/hdrhistogram-swift", from: "0.1.0"),
  ],
  targets: [
    // C layer: system libraries and real functions for macros / static header functions.
    .systemLibrary(
      name: "CLibUV", pkgConfig: "libuv", providers: [.apt(["libuv1-dev"])]),
    .systemLibrary(
      name: "COpenSSL", pkgConfig: "openssl", providers: [.apt(["libssl-dev"])]),
    .target(name: "CRelayShims", dependencies: ["CLibUV", "COpenSSL"]),

    // Pure layer: no libuv, no OpenSSL, no clock, no unseeded randomness.
    .target(name: "RelayWebSocket", swiftSettings: hot),
    .target(name: "RelayProtocol", dependencies: ["RelayWebSocket"], swiftSettings: hot),
    .target(name: "RelayCore", dependencies: ["RelayProtocol", "RelayWebSocket"], swiftSettings: hot),
    .target(name: "RelayCluster", dependencies: ["RelayCore", "RelayProtocol", "RelayWebSocket"], swiftSettings: hot),

    // I/O shell: the only Swift that touches libuv / OpenSSL.
    .target(name: "EventLoop", dependencies: ["CLibUV", "CRelayShims"], swiftSettings: hot),
    .target(name: "RelayCrypto", dependencies: ["COpenSSL", "CRelayShims", "RelayProtocol", "EventLoop"], swiftSettings: strict),
    .target(
      name: "RelayServer",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayWebSocket", "RelayProtocol", "RelayCore", "RelayCluster",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
      ],
      swiftSettings: hot),

    // Client SDK: the sans-I/O client machine, then the public API with its transports
    // (EventLoop on Linux, URLSession on Apple platforms).
    .target(name: "RelayClientCore", dependencies: ["RelayProtocol"], swiftSettings: strict),
    .target(
      name: "RelayClient",
      dependencies: [
        "RelayClientCore", "RelayProtocol",
        .target(name: "EventLoop", condition: .when(platforms: [.linux])),
        .target(name: "RelayWebSocket", condition: .when(platforms: [.linux])),
        .target(name: "RelayCrypto", condition: .when(platforms: [.linux])),
      ],
      swiftSettings: strict),

    // Executables.
    .executableTarget(
      name: "relay",
      dependencies: [
        "RelayServer", "RelayCrypto", "RelayCore", "RelayProtocol", "RelayWebSocket", "EventLoop",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strict),
    .executableTarget(
      name: "relay-bots",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayWebSocket", "RelayProtocol",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Histogram", package: "hdrhistogram-swift"),
      ],
      swiftSettings: strict),
    .target(name: "CAllocCounter", path: "Benchmarks/AllocCounter"),
    .executableTarget(
      name: "relay-bench",
      dependencies: ["RelayWebSocket", "RelayProtocol", "RelayCore", "EventLoop", "CAllocCounter"],
      path: "Benchmarks/relay-bench",
      swiftSettings: strict),

    // Tests.
    .target(name: "TestSupport", path: "Tests/TestSupport"),
    .testTarget(name: "RelayWebSocketTests", dependencies: ["RelayWebSocket", "RelayCrypto"]),
    .testTarget(name: "RelayProtocolTests", dependencies: ["RelayProtocol", "RelayWebSocket"]),
    .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore", "RelayProtocol"]),
    .testTarget(name: "RelayCryptoTests", dependencies: ["RelayCrypto", "TestSupport"]),
    .testTarget(name: "RelayClusterTests", dependencies: ["RelayCluster", "RelayCore", "RelayProtocol", "RelayCrypto"]),
    .testTarget(name: "EventLoopTests", dependencies: ["EventLoop", "RelayCrypto"]),
    .testTarget(
      name: "RelayServerTests",
      dependencies: [
        "RelayServer", "RelayWebSocket", "RelayProtocol", "RelayCore", "EventLoop", "RelayCrypto", "TestSupport",
        .product(name: "Logging", package: "swift-log"),
      ]),
    .testTarget(name: "RelayClientCoreTests", dependencies: ["RelayClientCore", "RelayProtocol"]),
    .testTarget(name: "RelayClientTests", dependencies: ["RelayClient", "RelayClientCore", "RelayProtocol", "TestSupport"]),
  ]
)
