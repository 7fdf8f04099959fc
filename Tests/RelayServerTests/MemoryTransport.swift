// An in-memory transport for the connection pipeline (ServerConnection.swift): what
// SwiftNIO's `EmbeddedChannel` is to a channel pipeline. Writes are queued as the
// socket queues them, "the kernel" takes them when the test flushes, a TLS sealer
// seals at flush time, and a close is reported only when the test runs the pending
// closes, never inside a write, as libuv reports it from its close callback.
import EventLoop
import RelayCore

@testable import RelayServer
import RelayPrimitives

final class MemoryTransport: ConnectionTransport {
  enum State { case open, shuttingDown, closed }
  private(set) var state = State.open
  /// Written and not yet taken by the kernel (plaintext when TLS is on).
  private(set) var queue: [[UInt8]] = []
  /// Everything the peer has been sent, in order (ciphertext when TLS is on).
  private(set) var wire: [UInt8] = []
  var maxOutboundBytes = 1 << 20
  /// False: the peer stopped reading, so a flush leaves the queue where it is.
  var peerReads = true
  var sealer: (any OutboundSealer)?
  /// The pipeline to tell about reads and the close.
  weak var connection: ServerConnection?
  private var closeReported = false
  /// Set by `shutdown` and `close`: the close the test delivers with `runPendingClose`.
  private(set) var closedGracefully = false

  var acceptsWrites: Bool { state == .open }
  var isClosed: Bool { state == .closed }
  var queuedBytes: Int { queue.reduce(0) { $0 + $1.count } }

  func write(_ buffer: OutboundBuffer) -> Bool {
    write(buffer.withUnsafeBytes { Array($0) })
  }

  /// Like `TCPConnection.write`: refused when ending; over the cap the bytes stay
  /// queued and the answer is false (a slow consumer).
  func write(_ bytes: [UInt8]) -> Bool {
    guard state == .open else { return false }
    queue.append(bytes)
    return queuedBytes <= maxOutboundBytes || queue.count == 1
  }

  /// Queued buffers the ones below may not pass or drop (`TCPConnection.writeHead`).
  private var pinned = 0

  @discardableResult func writeHead(_ bytes: [UInt8]) -> Bool {
    let queued = write(bytes)
    pinned = queue.count
    return queued
  }

  func writeFinal(_ bytes: [UInt8]) -> Bool {
    guard state == .open else { return false }
    queue.append(bytes)
    return true
  }

  /// Ahead of everything queued but a pinned head: nothing here is ever partly
  /// written or in flight.
  @discardableResult func writeControl(_ frame: OutboundBuffer) -> Bool {
    guard state == .open else { return false }
    queue.insert(frame.withUnsafeBytes { Array($0) }, at: min(pinned, queue.count))
    return true
  }

  @discardableResult func discardUnsent() -> Int {
    // Sealed bytes are already on the wire here, so every queued buffer is plaintext.
    let kept = min(pinned, queue.count)
    let dropped = queue[kept...].reduce(0) { $0 + $1.count }
    queue.removeSubrange(kept...)
    return dropped
  }

  func flushSoon() {}
  func flushFirst() {}
  func stopReading() {}
  func startReading() {}

  func shutdown() {
    guard state == .open else { return }
    if let sealer {
      sealQueue(sealer)
      sealer.closing()
      sealQueue(sealer)
    }
    state = .shuttingDown
    closedGracefully = true
  }

  func close() {
    guard state != .closed else { return }
    state = .closed
  }

  /// The kernel takes what is queued (if the peer reads): sealed first under TLS.
  func flush() {
    if let sealer { return sealQueue(sealer) }
    guard peerReads else { return }
    for bytes in queue { wire += bytes }
    queue = []
    pinned = 0
  }

  private func sealQueue(_ sealer: any OutboundSealer) {
    for bytes in queue { bytes.withUnsafeBytes { _ = sealer.seal($0) } }
    queue = []
    pinned = 0
    if let sealed = sealer.takeSealed() { wire += sealed } else { state = .closed }
  }

  /// Flushes and returns what the peer received since the last call.
  func take() -> [UInt8] {
    flush()
    defer { wire = [] }
    return wire
  }

  /// The peer sends `bytes` (one read; the pipeline may overwrite them).
  func receive(_ bytes: [UInt8]) {
    var copy = bytes
    copy.withUnsafeMutableBytes { connection?.didRead($0) }
  }

  /// A graceful shutdown completes (the peer's EOF) or a close takes effect: the
  /// pipeline hears of it now, once.
  func runPendingClose() {
    guard state != .open, !closeReported else { return }
    flush()
    state = .closed
    closeReported = true
    connection?.didClose(.local)
  }
}
