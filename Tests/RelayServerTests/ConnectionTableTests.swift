import RelayCore
import RelayProtocol
import Testing

@testable import RelayServer
import RelayPrimitives

private final class Stub {
  let id: ConnectionID
  init(_ raw: UInt64) { id = ConnectionID(raw) }
}

/// Keyed and hashed like the server's connections (`ServerConnectionsById`).
private enum StubsById: TableKeying {
  static func key(of element: Stub) -> ConnectionID { element.id }
  static func hash(_ key: ConnectionID) -> UInt64 { key.tableHash }
}

@Suite struct ConnectionTableTests {  // the core's RefTable as the server uses it
  @Test("matches a Dictionary model through growth, seeded random removals and shrinking")
  func matchesModel() {
    var table = RefTable<StubsById>()
    var model: [UInt64: Stub] = [:]
    var random = SeededRandom(seed: 42)
    var next: UInt64 = 1
    for round in 0..<20_000 {
      // Phases: mostly opening, then mostly closing, so the table grows and shrinks.
      let opening = (round / 5_000) % 2 == 0 ? 4 : 1
      if model.isEmpty || Int.random(in: 0..<5, using: &random) < opening {
        let stub = Stub(next)
        next += UInt64.random(in: 1...3, using: &random)  // gaps, like closed handshakes
        table.insert(stub)
        model[stub.id.raw] = stub
      } else {
        let victim = model.keys.randomElement(using: &random)!
        #expect(table.removeValue(forKey: ConnectionID(victim)) === model.removeValue(forKey: victim))
      }
      #expect(table.count == model.count)
      if round % 997 == 0 {
        for (raw, stub) in model { #expect(table[ConnectionID(raw)] === stub) }
        #expect(table[ConnectionID(next + 7)] == nil)
        #expect(Set(table.values.map(\.id.raw)) == Set(model.keys))
      }
    }
    for raw in Array(model.keys) { #expect(table.removeValue(forKey: ConnectionID(raw)) != nil) }
    #expect(table.isEmpty && table.values.isEmpty)
    #expect(table.removeValue(forKey: ConnectionID(1)) == nil)
  }
}
