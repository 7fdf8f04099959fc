// DESIGN.md "Layers": the pure targets import no C module, Dispatch or Foundation, read
// no clock or environment, and draw no randomness except the injected IdentifierSource.
import Foundation
import Testing

@Suite struct PurityTests {
  static let forbidden = [
    "import Foundation", "import Dispatch", "import Glibc", "import Darwin", "import CLibUV",
    "import COpenSSL", "import CRelayShims", "Date()", "ProcessInfo", "getenv", ".random(",
    "SystemRandomNumberGenerator", "ContinuousClock", "SuspendingClock", "clock_gettime",
  ]

  @Test(arguments: ["RelayProtocol", "RelayCore", "RelayCluster", "RelayClientCore"])
  func pureTargetHasNoForbiddenUses(_ target: String) throws {
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
      .deletingLastPathComponent().deletingLastPathComponent()
    let dir = root.appendingPathComponent("Sources/\(target)")
    let files = try FileManager.default.contentsOfDirectory(atPath: dir.path).filter { $0.hasSuffix(".swift") }
    #expect(!files.isEmpty)
    for file in files.sorted() {
      let text = try String(contentsOf: dir.appendingPathComponent(file), encoding: .utf8)
      for needle in Self.forbidden {
        #expect(!text.contains(needle), "\(target)/\(file) uses \(needle)")
      }
    }
  }
}
