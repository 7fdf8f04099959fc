// The shell around `ClientMachine`, shared by every transport: it feeds the machine
// on the transport's own thread, carries out socket effects through a `WireTransport`
// and hands events, replies and the new snapshot to the app's side in one batch.

import RelayClientCore

/// What the app's side posts to the transport thread.
enum RunnerInput: Sendable {
  case connect
  case disconnect
  case command(ClientCommand, requestID: UInt64?)
  case background(Bool)
  case auth(RelayAuth)
  /// Kill the socket without a close frame, as a network failure would (tests).
  case dropConnection
  /// Kill the socket without a close frame and stop, as a device that vanished
  /// (tests: the relay sees the user lost, then timed out).
  case abandon
  /// Write the kept place, then stop as a killed app would: no close frame, the
  /// place stays on disk for the next launch.
  case suspend
  /// The client is gone: close everything and end the thread.
  case shutdown
}

/// One socket implementation (EventLoop on Linux, URLSession on Apple platforms).
/// Called only on its runner's thread.
protocol WireTransport: AnyObject {
  /// Monotonic milliseconds.
  var nowMs: Int64 { get }
  /// Opens a new WebSocket; reports through the runner's `transport…` methods.
  func open()
  /// Sends one text message on the open WebSocket.
  func send(_ text: [UInt8])
  /// Closes the current WebSocket (nil: no close frame); never reports back on it.
  func close(code: UInt16?)
  /// Kills the current socket as a network failure would; reports it as closed.
  func drop()
  /// Arms the one timer to call `runner.tick()` at `atMs` (nil: disarm).
  func armTimer(atMs: Int64?)
}

/// Everything the app side receives from one step of the machine.
struct DeliveryBatch: Sendable {
  var snapshot: ClientMachine.Snapshot
  /// Only `.event` and `.reply` effects, in machine order.
  var effects: [ClientEffect]
}

/// Drives one `ClientMachine`. Confined to the transport's thread.
final class ClientRunner {
  private var machine: ClientMachine
  weak var wire: (any WireTransport)?
  private let deliver: @Sendable (DeliveryBatch) -> Void
  private var lastState: ConnectionState = .disconnected
  private var resumeFile: ResumeFile?
  /// What the file holds, as last written or read.
  private var stored: ResumeRecord?
  /// When a `seq`-only change is due to be written.
  private var storeDueMs: Int64?

  init(
    configuration: ClientConfiguration, seed: UInt64, resumeFile: ResumeFile? = nil,
    deliver: @escaping @Sendable (DeliveryBatch) -> Void
  ) {
    machine = ClientMachine(configuration: configuration, seed: seed)
    self.deliver = deliver
    self.resumeFile = resumeFile
    if let record = resumeFile?.load() {
      machine.restore(record)
      stored = record
    }
  }

  private var now: Int64 { wire?.nowMs ?? 0 }

  /// True between `welcome` and the next drop.
  var isConnected: Bool { machine.connectionState == .connected }

  func handle(_ input: RunnerInput) {
    switch input {
    case .connect: apply(machine.connect(nowMs: now), alwaysDeliver: true)
    case .disconnect: apply(machine.disconnect(nowMs: now), alwaysDeliver: true)
    case .command(let command, let requestID):
      apply(machine.command(command, requestID: requestID, nowMs: now))
    case .background(let value): apply(machine.setBackground(value, nowMs: now))
    case .auth(let auth): machine.setAuth(auth)
    case .dropConnection: wire?.drop()
    case .abandon:
      wire?.close(code: nil)
      apply(machine.disconnect(nowMs: now), alwaysDeliver: true)
    case .suspend:
      persist(force: true)
      resumeFile = nil  // what is on disk is the place to resume; nothing may remove it now
      wire?.close(code: nil)
      apply(machine.disconnect(nowMs: now), alwaysDeliver: true)
    case .shutdown: apply(machine.disconnect(nowMs: now))
    }
  }

  func transportOpened() { apply(machine.transportOpened(nowMs: now)) }
  func transportText(_ text: [UInt8]) { apply(machine.received(text: text, nowMs: now), alwaysDeliver: true) }
  func transportActivity() { machine.transportActivity(nowMs: now) }
  func transportClosed(code: UInt16?, reason: String) {
    apply(machine.transportClosed(code: code, reason: reason, nowMs: now))
  }
  func tick() {
    if let due = storeDueMs, due <= now { persist(force: true) }
    apply(machine.tick(nowMs: now))
  }

  /// Socket effects run here, in order; the rest goes to the app in one batch,
  /// with the snapshot taken after the whole step.
  private func apply(_ effects: [ClientEffect], alwaysDeliver: Bool = false) {
    var forApp: [ClientEffect] = []
    for effect in effects {
      switch effect {
      case .openTransport: wire?.open()
      case .send(let text): wire?.send(text)
      case .closeTransport(let code): wire?.close(code: code)
      case .event, .reply: forApp.append(effect)
      }
    }
    let state = machine.connectionState
    if alwaysDeliver || !forApp.isEmpty || state != lastState {
      lastState = state
      deliver(DeliveryBatch(snapshot: machine.snapshot, effects: forApp))
    }
    persist(force: false)
    wire?.armTimer(atMs: [machine.nextDeadlineMs, storeDueMs].compactMap { $0 }.min())
  }

  /// Keeps the file equal to the machine's place: token and membership changes at
  /// once, `seq`-only changes within `ResumeFile.seqDelayMs` (`force`: now).
  private func persist(force: Bool) {
    guard let resumeFile else { return }
    let record = machine.resumeRecord(relay: resumeFile.relay)
    guard record != stored else {
      storeDueMs = nil
      return
    }
    if !force, let record, let stored, record.sameMembership(as: stored) {
      if storeDueMs == nil { storeDueMs = now + ResumeFile.seqDelayMs }
      return
    }
    resumeFile.store(record)
    stored = record
    storeDueMs = nil
  }
}
