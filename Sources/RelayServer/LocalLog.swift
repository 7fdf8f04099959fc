import RelayCluster
import RelayClusterNode
import RelayCore

/// Standalone: each input goes straight into the core, and its effects are applied.
final class LocalLog: InputLog {
  unowned let server: RelayServer

  init(server: RelayServer) { self.server = server }

  var takesBorrowedText: Bool { true }
  var acceptsInputs: Bool { true }
  var isBackedUp: Bool { false }

  func connectionID(local: UInt64) -> ConnectionID { ConnectionID(local) }

  func open(_ id: ConnectionID) {
    server.core.open(id, at: server.now)
    server.applyEffects()
  }

  func text(_ id: ConnectionID, _ payload: [UInt8]) {
    payload.withUnsafeBytes { server.inputText(id, borrowed: $0) }
    server.applyEffects()
  }

  func text(_ id: ConnectionID, borrowed payload: UnsafeRawBufferPointer) -> Bool {
    server.inputText(id, borrowed: payload)
    return true
  }

  func closed(_ id: ConnectionID, clean: Bool) {
    server.core.closed(id, clean: clean, at: server.now)
    server.applyEffects()
  }

  func admin(request: UInt64, _ action: AdminAction) {
    let result = Replica.run(action, on: server.core, at: server.now)
    server.applyEffects()
    server.answerAdmin(request, result)
  }
}
