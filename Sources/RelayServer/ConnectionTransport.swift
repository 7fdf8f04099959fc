// The seam between a connection's pipeline (ServerConnection.swift) and its socket.
import EventLoop
import RelayPrimitives

/// What a connection's pipeline reads from and writes to: the socket
/// (`TCPConnection`) in the server, an in-memory transport in tests (the role
/// SwiftNIO's `EmbeddedChannel` plays). Writes are corked and flushed once per loop
/// turn; with a `sealer` (TLS) they are sealed at flush time. A transport reports its
/// close later, never inside one of these calls.
protocol ConnectionTransport: AnyObject {
  func write(_ buffer: OutboundBuffer) -> Bool
  func write(_ bytes: [UInt8]) -> Bool
  /// Bytes that are not frames (the 101 response): no control frame goes ahead of
  /// them and `discardUnsent` keeps them.
  @discardableResult func writeHead(_ bytes: [UInt8]) -> Bool
  /// The last bytes (a close frame after `discardUnsent`), past the outbound cap.
  func writeFinal(_ bytes: [UInt8]) -> Bool
  /// Drops queued whole frames the kernel has not started on.
  @discardableResult func discardUnsent() -> Int
  /// A control frame ahead of queued data, at a frame boundary (RFC 6455 §5.4).
  @discardableResult func writeControl(_ frame: OutboundBuffer) -> Bool
  /// Flushes at the end of the turn even with nothing queued (TLS handshake output).
  func flushSoon()
  /// Flush this connection's queue first in the next flush pass, whatever that pass's
  /// budget (Loop.flushBudgetNs): a reply or personal event, not a fan-out.
  func flushFirst()
  /// Graceful end: the queue is flushed, then FIN.
  func shutdown()
  /// Immediate end.
  func close()
  /// Flow control of reads (the turn budget, RelayServer+Turns.swift).
  func stopReading()
  func startReading()
  var acceptsWrites: Bool { get }
  var isClosed: Bool { get }
  var queuedBytes: Int { get }
  /// Past this many queued bytes a write says false: a slow consumer (`--max-outbound-bytes`).
  var maxOutboundBytes: Int { get set }
  var sealer: (any OutboundSealer)? { get set }
}

extension TCPConnection: ConnectionTransport {}
