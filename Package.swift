// swift-tools-version:6.0
import PackageDescription

// One settings block for every Swift target (DESIGN.md, "Style").
let strict: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny"),
  .enableUpcomingFeature("InternalImportsByDefault"),
  .enableUpcomingFeature("MemberImportVisibility"),
]

// The relay's own modules are built for release with Swift's dynamic exclusivity
// checks off: on the fan-out path they cost more than the dictionary lookup (a
// thread-local access set for every class-property modify; figures in
// Benchmarks/results/). That flag is passed on the command line
// (`swift build -c release -Xswiftc -enforce-exclusivity=unchecked`: `make release`,
// `make bench`, the Dockerfile; there it covers every module of the build, the
// dependencies' too, all of which keep their checks in debug), not here: SwiftPM refuses `unsafeFlags` in any
// target of a product another package depends on by version, and `RelayClient`
// is such a product. Debug builds, which the tests use, keep the checks.
let hot: [SwiftSetting] = strict

let package = Package(
  name: "Relay",
  // The client's floor: `@Observable` state (iOS 17, macOS 14, tvOS 17, visionOS 1) and
  // `URLSessionWebSocketTask`. No watchOS: it allows that task to audio apps only.
  platforms: [.iOS(.v17), .macOS(.v14), .tvOS(.v17), .visionOS(.v1)],
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
    // libcurl (OpenSSL flavour, HTTP/2 through nghttp2) with typed wrappers of its
    // variadic setopt/getinfo calls.
    .systemLibrary(
      name: "CLibCurl", pkgConfig: "libcurl", providers: [.apt(["libcurl4-openssl-dev"])]),

    // Pure layer: no libuv, no OpenSSL, no clock, no unseeded randomness. Each target
    // lists exactly the local targets its files import.
    // RelayPrimitives: the small shared values every layer uses (close codes and the
    // reconnect policy, Base64, the seeded PRNG, backoff, FIFO queue and deadline lane).
    .target(name: "RelayPrimitives", swiftSettings: hot),
    .target(name: "RelayWebSocket", dependencies: ["RelayPrimitives"], swiftSettings: hot),
    .target(name: "RelayProtocol", dependencies: ["RelayPrimitives"], swiftSettings: hot),
    .target(name: "RelayCore", dependencies: ["RelayProtocol", "RelayPrimitives"], swiftSettings: hot),
    .target(name: "RelayCluster", dependencies: ["RelayCore", "RelayProtocol", "RelayPrimitives"], swiftSettings: hot),
    // RelayClusterDriver: the cluster driver's decisions (appends, replicas, backpressure,
    // Redis's liveness) as a machine of events and effects; ClusterNode (RelayClusterNode)
    // is its adapter.
    .target(name: "RelayClusterDriver", dependencies: ["RelayPrimitives"], swiftSettings: hot),
    // RelayPush: the push providers' wire rules (APNs, FCM), credentials' lifetimes and
    // the retry schedule, with time and keys passed in.
    .target(name: "RelayPush", dependencies: ["RelayCore", "RelayProtocol", "RelayPrimitives"], swiftSettings: strict),

    // I/O shell: the only Swift that touches libuv / OpenSSL.
    .target(name: "EventLoop", dependencies: ["CLibUV", "CRelayShims", "RelayPrimitives"], swiftSettings: hot),
    .target(name: "RelayCrypto", dependencies: ["COpenSSL", "CRelayShims", "RelayPrimitives"], swiftSettings: strict),
    // Outbound HTTP/1.1 and HTTP/2 (webhooks, push providers): libcurl's multi socket
    // interface on the relay's loop.
    .target(
      name: "OutboundHTTP", dependencies: ["CLibCurl", "COpenSSL", "EventLoop", "RelayPrimitives"], swiftSettings: strict),
    // RelayRedis: Redis connections on the loop (RESP over TCP or TLS, the liveness
    // rule, AUTH/SELECT) and the Sentinel client; the cluster driver's I/O side.
    .target(
      name: "RelayRedis",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayCluster", "RelayClusterDriver", "RelayPrimitives",
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: hot),
    // RelayClusterNode: the input logs' seam (InputLog, ReplicaHost, ReplicatedInputs)
    // and the cluster node, the driver's adapter on the loop: Redis replies and timers in,
    // the driver's effects and the replica's records out. RelayServer is its host.
    .target(
      name: "RelayClusterNode",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayRedis", "RelayCluster", "RelayClusterDriver", "RelayCore", "RelayProtocol",
        "RelayPrimitives",
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: hot),
    .target(
      name: "RelayServer",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayWebSocket", "RelayProtocol", "RelayCore", "RelayCluster", "RelayPrimitives",
        "RelayClusterNode", "OutboundHTTP", "RelayPush",
        .product(name: "Logging", package: "swift-log"),
        .product(name: "Metrics", package: "swift-metrics"),
        .product(name: "Prometheus", package: "swift-prometheus"),
      ],
      swiftSettings: hot,
      plugins: ["EmbedDemoPlugin"]),

    // Client SDK: the sans-I/O client machine, then the public API with its transports
    // (EventLoop on Linux, URLSession on Apple platforms).
    .target(name: "RelayClientCore", dependencies: ["RelayProtocol", "RelayPrimitives"], swiftSettings: strict),
    .target(
      name: "RelayClient",
      dependencies: [
        "RelayClientCore", "RelayProtocol", "RelayPrimitives",
        .target(name: "EventLoop", condition: .when(platforms: [.linux])),
        .target(name: "RelayWebSocket", condition: .when(platforms: [.linux])),
        .target(name: "RelayCrypto", condition: .when(platforms: [.linux])),
      ],
      swiftSettings: strict),

    // Executables.
    .executableTarget(
      name: "relay",
      dependencies: [
        "RelayServer", "RelayCore", "RelayProtocol", "RelayPrimitives", "EventLoop", "RelayPush",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Logging", package: "swift-log"),
      ],
      swiftSettings: strict),
    .executableTarget(
      name: "relay-bots",
      dependencies: [
        "EventLoop", "RelayCrypto", "RelayWebSocket", "RelayProtocol", "RelayPrimitives", "RelayClientCore",
        .product(name: "ArgumentParser", package: "swift-argument-parser"),
        .product(name: "Histogram", package: "hdrhistogram-swift"),
      ],
      swiftSettings: strict),
    .target(name: "CAllocCounter", path: "Benchmarks/AllocCounter"),
    .executableTarget(
      name: "relay-bench",
      dependencies: ["RelayWebSocket", "RelayProtocol", "RelayCore", "RelayPrimitives", "EventLoop", "CAllocCounter"],
      path: "Benchmarks/relay-bench",
      swiftSettings: strict),

    // Build tools: the demo page and the JavaScript client, embedded into RelayServer
    // at build time (served at /demo; no generated copy in the tree).
    .executableTarget(name: "embed-demo", swiftSettings: strict),
    .plugin(name: "EmbedDemoPlugin", capability: .buildTool(), dependencies: ["embed-demo"]),

    // Tests.
    .target(name: "TestSupport", path: "Tests/TestSupport"),
    .testTarget(name: "RelayPrimitivesTests", dependencies: ["RelayPrimitives"]),
    .testTarget(name: "RelayWebSocketTests", dependencies: ["RelayWebSocket", "RelayPrimitives", "RelayCrypto"]),
    .testTarget(name: "RelayProtocolTests", dependencies: ["RelayProtocol", "RelayPrimitives", "RelayCrypto"]),
    .testTarget(name: "RelayCoreTests", dependencies: ["RelayCore", "RelayProtocol", "RelayPrimitives"]),
    .testTarget(name: "RelayPushTests", dependencies: ["RelayPush", "RelayCore", "RelayProtocol", "RelayPrimitives"]),
    .testTarget(name: "RelayCryptoTests", dependencies: ["RelayCrypto", "RelayProtocol", "RelayPrimitives", "TestSupport"]),
    .testTarget(name: "RelayClusterTests", dependencies: ["RelayCluster", "RelayCore", "RelayProtocol", "RelayPrimitives", "RelayCrypto"]),
    .testTarget(name: "RelayClusterDriverTests", dependencies: ["RelayClusterDriver", "RelayPrimitives"]),
    .testTarget(name: "EventLoopTests", dependencies: ["EventLoop"]),
    .testTarget(name: "OutboundHTTPTests", dependencies: ["OutboundHTTP", "EventLoop", "TestSupport"], exclude: ["Fixtures"]),
    .testTarget(
      name: "RelayServerTests",
      dependencies: [
        "RelayServer", "RelayWebSocket", "RelayProtocol", "RelayCore", "RelayPrimitives", "EventLoop", "RelayCrypto", "TestSupport",
        "OutboundHTTP", "RelayPush", "RelayRedis",
        .product(name: "Logging", package: "swift-log"),
      ]),
    .testTarget(name: "RelayClientCoreTests", dependencies: ["RelayClientCore", "RelayProtocol", "RelayPrimitives"]),
    .testTarget(
      name: "RelayClientTests",
      dependencies: ["RelayClient", "RelayProtocol", "RelayPrimitives", "TestSupport", "RelayPush", "RelayCore"]),
    // The source-tree rules (imports per target, purity, sizes, comments): reads files only.
    .testTarget(name: "TidyTests"),
  ]
)
