// swift-tools-version:6.0
// libFuzzer targets for the relay's parsers of untrusted bytes (DESIGN.md, "Tests,
// fastest first"). A nested package so the main build never sees -sanitize=fuzzer:
// the pure modules are the root package's own sources, reached through symlinks,
// instrumented for coverage and AddressSanitizer.
// Build and run with `make fuzz` / `make fuzz-smoke` (scripts/fuzz.sh).
import PackageDescription

let instrumented: [SwiftSetting] = [.unsafeFlags(["-sanitize=fuzzer,address"])]
let link: [LinkerSetting] = [.unsafeFlags(["-sanitize=fuzzer,address", "-use-ld=lld"])]

let package = Package(
  name: "RelayFuzz",
  targets: [
    .target(name: "RelayPrimitives", swiftSettings: instrumented),
    .target(name: "RelayWebSocket", dependencies: ["RelayPrimitives"], swiftSettings: instrumented),
    .target(name: "RelayProtocol", dependencies: ["RelayPrimitives"], swiftSettings: instrumented),
    // The RESP codec's two files, without the rest of RelayCluster (its buffer is a
    // RelayPrimitives queue).
    .target(name: "RESPCodec", dependencies: ["RelayPrimitives"], swiftSettings: instrumented),
    .target(name: "RelayCore", dependencies: ["RelayProtocol", "RelayPrimitives"], swiftSettings: instrumented),
    .target(name: "RelayCluster", dependencies: ["RelayCore", "RelayProtocol", "RelayPrimitives"], swiftSettings: instrumented),
    .target(name: "FuzzDriver"),
    .executableTarget(name: "FuzzFrames", dependencies: ["RelayWebSocket", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzHTTPHead", dependencies: ["RelayWebSocket", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzJSON", dependencies: ["RelayProtocol", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzCommand", dependencies: ["RelayProtocol", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzRESP", dependencies: ["RESPCodec", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzJWT", dependencies: ["RelayProtocol", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzLogRecord", dependencies: ["RelayCluster", "RelayCore", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzDataFile", dependencies: ["RelayCluster", "RelayCore", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
    .executableTarget(name: "FuzzSnapshot", dependencies: ["RelayCore", "RelayProtocol", "FuzzDriver"], swiftSettings: instrumented, linkerSettings: link),
  ]
)
