import RelayProtocol
import Testing

@testable import RelayCore

/// Deterministic ids: "id1", "id2", … (URL-safe), seeded by a prefix.
final class SeededIDs: IdentifierSource {
  var counter = 0
  let prefix: String
  init(prefix: String = "id") { self.prefix = prefix }
  func token(byteCount: Int) -> String {
    counter += 1
    return "\(prefix)\(counter)"
  }
}
