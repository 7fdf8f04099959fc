import EventLoop
import RelayCluster
import RelayClusterNode
import RelayCore
import RelayPrimitives

/// Standalone: each input goes straight into the core, and its effects are applied;
/// the core's deadlines fire through its own `tick`, from one timer.
final class LocalLog: InputLog {
  unowned let server: RelayServer
  private var timer: EventLoop.Timer?
  private var deadline = DeadlineTimer()

  init(server: RelayServer) { self.server = server }

  func start(ready: @escaping () -> Void) {
    timer = EventLoop.Timer(loop: server.loop)
    effectsApplied()
  }

  func stop(force: Bool) {
    timer?.close()
    timer = nil
  }

  func effectsApplied() {
    guard let timer else { return }
    timer.follow(deadline.arm(dueMs: server.core.nextDeadline, nowMs: Int64(server.loop.nowMs))) { [unowned self] in
      self.deadline.fired()
      self.server.core.tick(at: self.server.now)
      self.server.applyEffects()
    }
  }

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
