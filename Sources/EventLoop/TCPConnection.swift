import CLibUV
import RelayPrimitives

/// Why a connection closed, reported once by `TCPConnection.onClose`.
public enum CloseReason: Sendable {
  /// This side called `close()`, `reset()` or `shutdown()` (or `Loop.close()` closed it).
  case local
  /// The peer closed its side (`UV_EOF`) before we closed ours.
  case eof
  /// A read, write or shutdown failed, e.g. `UV_ECONNRESET` when the peer vanished.
  case error(LoopError)
}

/// Receives a connection's reads and its close. One reference per connection, where
/// the `onRead` / `onClose` closures cost a heap context each: a server holding tens of
/// thousands of idle connections makes its per-connection object the delegate.
public protocol TCPConnectionDelegate: AnyObject {
  /// Bytes read from the peer, in the loop-wide read buffer: valid only during the call
  /// (copy what must outlive it) and writable, so a decoder may transform them in place
  /// (WebSocket unmasking) instead of copying them first.
  func connection(_ connection: TCPConnection, didRead bytes: UnsafeMutableRawBufferPointer)
  /// Called exactly once, after the handle is fully closed; see `TCPConnection`'s close
  /// semantics.
  func connection(_ connection: TCPConnection, didCloseWith reason: CloseReason)
  /// A `uv_write` completed: the kernel took bytes it had refused before, so the
  /// peer acknowledged earlier ones (its TCP is alive and its application reads).
  /// Only connections with a backlog get this; see `TCPConnection+Write.swift`.
  func connectionDidDrain(_ connection: TCPConnection)
}

extension TCPConnectionDelegate {
  public func connectionDidDrain(_ connection: TCPConnection) {}
}

/// One TCP stream (`uv_tcp_t`), accepted by a `TCPListener` or opened by `TCPConnector`.
///
/// Ownership: the handle is heap-allocated and its `data` holds a +1 on this object,
/// so the connection lives until its close callback even if the caller drops every
/// reference (`HandleOwner`). The handle, the pooled write and shutdown requests and
/// every queued `OutboundBuffer` are released only in that close callback, after
/// libuv has cancelled in-flight requests with `UV_ECANCELED`
/// (`docs/src/handle.rst`), so bytes given to `uv_write` outlive its callback.
///
/// Reads and the close go to `delegate`, or to the `onRead` / `onClose` closures (a
/// convenience that installs a small delegate holding them; setting either replaces
/// another delegate).
///
/// Close semantics (one code path, `beginClose()`):
/// - `close()`: immediate; queued bytes are dropped; `onClose(.local)`.
/// - `reset()`: like `close()` but sends RST (`uv_tcp_close_reset`).
/// - `shutdown()`: graceful; see its documentation; `onClose(.local)`.
/// - Peer EOF: with nothing queued the connection closes at once; otherwise it closes
///   gracefully like `shutdown()` (queued bytes are still sent). `onClose(.eof)`.
/// - Read, write or shutdown failure: immediate close; `onClose(.error(e))`.
/// The first reason recorded wins: an error during our own shutdown still reports
/// `.local`. `onClose` runs exactly once, from the close callback, after the handle
/// is fully closed; the delegate (with `onRead` and `onClose`) is then cleared to break
/// reference cycles.
/// No callback ever runs synchronously inside `write`, `close`, `reset` or `shutdown`,
/// so callers need not guard against re-entrancy.
///
/// Memory: an accepted connection that is idle costs this object and its `uv_tcp_t`,
/// nothing more. Rarely used state (`userData`, `tag`, the remote address, a pending
/// connect) lives in a side object created on first use, the write queue allocates
/// only while more than one buffer waits, and the write and shutdown requests only
/// when first needed (DESIGN.md: an idle connection must stay cheap).
public final class TCPConnection: HandleOwner {
  enum State {
    /// Reading and writing.
    case open
    /// Graceful close in progress: no new writes; flushing, half-closed, or waiting
    /// for the peer's EOF; bounded by the loop's linger deadline.
    case shuttingDown
    /// `uv_close` called; waiting for the close callback.
    case closing
    /// Close callback ran; `onClose` delivered.
    case closed
  }

  let loop: Loop
  let tcp: UnsafeMutablePointer<uv_tcp_t>

  /// Receives reads and the close; strong, cleared after the close is reported.
  public var delegate: (any TCPConnectionDelegate)? {
    get { handler }
    set { handler = newValue }
  }

  /// Receives bytes read from the peer. The buffer is the loop-wide read buffer and is
  /// valid only during the call: copy what must outlive it.
  public var onRead: ((UnsafeRawBufferPointer) -> Void)? {
    get { (handler as? ClosureDelegate)?.onRead }
    set { closureDelegate().onRead = newValue }
  }
  /// Called exactly once, after the handle is fully closed; see the type's close semantics.
  public var onClose: ((CloseReason) -> Void)? {
    get { (handler as? ClosureDelegate)?.onClose }
    set { closureDelegate().onClose = newValue }
  }
  /// Cap on `queuedBytes` (the slow-consumer limit), default 1 MiB. `write` refuses beyond it.
  public var maxOutboundBytes: Int {
    get { outboundByteLimit }
    set { outboundByteLimit = newValue }
  }
  /// Bytes accepted by `write` and not yet confirmed written to the kernel.
  public var queuedBytes: Int { queuedByteCount }
  /// Open for writes: not closing or shutting down (a refused write to a connection
  /// that is not open says nothing about how fast its peer reads).
  public var acceptsWrites: Bool { state == .open }

  /// Free for the owner of the connection, e.g. its session object. Cleared after `onClose`.
  public var userData: AnyObject? {
    get { extras?.userData }
    set {
      guard newValue != nil || extras != nil else { return }
      ensureExtras().userData = newValue
    }
  }
  /// Free for the owner of the connection, e.g. a connection id.
  public var tag: UInt64 {
    get { extras?.tag ?? 0 }
    set {
      guard newValue != 0 || extras != nil else { return }
      ensureExtras().tag = newValue
    }
  }

  // Hot-path state lives in internal stored properties behind the public accessors:
  // in a whole-module build the compiler can then prove their accesses never overlap
  // and drop the dynamic exclusivity checks (`swift_beginAccess`), a large share of a
  // fan-out write's instructions; public stored properties keep those checks because
  // code outside the module may access them.
  var handler: (any TCPConnectionDelegate)?
  var extras: Extras?
  var outboundByteLimit = 1 << 20
  var queuedByteCount = 0
  /// Queued buffers, oldest first; the first `inFlightBufferCount` belong to the
  /// `uv_write` in flight and must stay alive until its callback.
  @exclusivity(unchecked) var pending = WriteQueue()
  var closeReason: CloseReason?
  var state = State.open
  var writeInFlight = false
  /// Listed in `loop.dirtyConnections` awaiting the end-of-turn flush.
  var isDirty = false
  var isReading = false
  var peerSentEOF = false
  var shutdownCompleted = false

  /// State few connections need, kept out of the connection object itself: the
  /// write and shutdown requests exist only once the kernel refused part of a write
  /// or a graceful close began, which an idle connection never needs.
  final class Extras {
    var userData: AnyObject?
    var tag: UInt64 = 0
    var remoteAddress: String?
    /// Set by `TCPConnector` until its connect callback runs.
    var connectCompletion: ((Result<TCPConnection, LoopError>) -> Void)?
    var writeRequest: UnsafeMutablePointer<uv_write_t>?
    var shutdownRequest: UnsafeMutablePointer<uv_shutdown_t>?
    var inFlightByteCount = 0
    var inFlightBufferCount = 0
    /// Encrypts what is written (TLS); see `OutboundSealer`.
    var sealer: (any OutboundSealer)?
    /// Buffers at the front of `pending` that are already sealed (ciphertext).
    var sealedCount = 0
    /// Buffers at the front of `pending` that hold bytes other than frames (an HTTP
    /// response head): nothing is put ahead of them or dropped from them.
    var pinnedCount = 0
  }

  /// The one reusable write request: at most one `uv_write` is in flight per connection.
  var writeRequest: UnsafeMutablePointer<uv_write_t>? {
    get { extras?.writeRequest }
    set { if newValue != nil || extras != nil { ensureExtras().writeRequest = newValue } }
  }
  var shutdownRequest: UnsafeMutablePointer<uv_shutdown_t>? {
    get { extras?.shutdownRequest }
    set { if newValue != nil || extras != nil { ensureExtras().shutdownRequest = newValue } }
  }
  /// Buffers at the front of `pending` that the `uv_write` in flight owns.
  var inFlightBufferCount: Int {
    get { extras?.inFlightBufferCount ?? 0 }
    set { if newValue != 0 || extras != nil { ensureExtras().inFlightBufferCount = newValue } }
  }
  var inFlightByteCount: Int {
    get { extras?.inFlightByteCount ?? 0 }
    set { if newValue != 0 || extras != nil { ensureExtras().inFlightByteCount = newValue } }
  }

  func ensureExtras() -> Extras {
    if let extras { return extras }
    let created = Extras()
    extras = created
    return created
  }

  /// Set by `TCPConnector` until its connect callback runs.
  var connectCompletion: ((Result<TCPConnection, LoopError>) -> Void)? {
    get { extras?.connectCompletion }
    set {
      guard newValue != nil || extras != nil else { return }
      ensureExtras().connectCompletion = newValue
    }
  }

  /// The delegate behind `onRead` / `onClose`, installed on first use.
  private func closureDelegate() -> ClosureDelegate {
    if let existing = handler as? ClosureDelegate { return existing }
    let created = ClosureDelegate()
    handler = created
    return created
  }

  /// Initialises a `uv_tcp_t` on `loop`; libuv holds the +1 until the close callback.
  init(loop: Loop) {
    self.loop = loop
    tcp = .allocate(capacity: 1)
    preconditionLibUVSucceeded(uv_tcp_init(loop.rawLoop, tcp), "uv_tcp_init")
    tcp.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit {
    precondition(state == .closed, "TCPConnection released before its close callback")
  }

  var stream: UnsafeMutablePointer<uv_stream_t> { tcp.cast() }

  /// True once the connection is closing or closed (`close`, `reset`, failure, or the
  /// end of a graceful close); `write` then returns false.
  public var isClosed: Bool { state == .closing || state == .closed }

  /// True during a graceful close (`shutdown()` or a peer EOF with data queued).
  public var isShuttingDown: Bool { state == .shuttingDown }

  /// The peer as `"127.0.0.1:5000"` or `"[::1]:5000"`; empty if unknown. Cached on first use.
  public var remoteAddress: String {
    if let cached = extras?.remoteAddress { return cached }
    guard !isClosed, let address = peerAddress(tcp) else { return "" }
    ensureExtras().remoteAddress = address
    return address
  }

  /// Starts delivering bytes to `onRead` (`uv_read_start`). No effect once closing or
  /// after the peer's EOF.
  public func startReading() {
    guard state == .open || state == .shuttingDown, !isReading, !peerSentEOF else { return }
    let result = uv_read_start(stream, readAllocCallback, readCallback)
    guard result == 0 else { return fail(LoopError(code: result)) }
    isReading = true
  }

  /// Stops reading (`uv_read_stop`), e.g. for backpressure; the peer's EOF then goes
  /// unnoticed until reading resumes.
  public func stopReading() {
    guard isReading, state == .open || state == .shuttingDown else { return }
    uv_read_stop(stream)
    isReading = false
  }

  /// Immediate close: queued bytes are dropped (freed in the close callback, after
  /// libuv cancelled any in-flight write); `onClose(.local)` follows. Idempotent; safe
  /// from inside `onRead`.
  public func close() {
    guard state == .open || state == .shuttingDown else { return }
    closeReason = closeReason ?? .local
    beginClose()
  }

  /// Abortive close: the peer sees a reset (`uv_tcp_close_reset`, SO_LINGER 0).
  /// libuv refuses it once a `uv_shutdown` was issued (`docs/src/tcp.rst`), in which
  /// case this falls back to a plain close.
  public func reset() {
    guard state == .open || state == .shuttingDown else { return }
    closeReason = closeReason ?? .local
    state = .closing
    if shutdownRequest == nil, uv_tcp_close_reset(tcp, handleCloseCallback) == 0 { return }
    uv_close(tcp.cast(), handleCloseCallback)
  }

  /// Graceful close: no further writes are accepted; everything queued is flushed,
  /// then `uv_shutdown` half-closes (it waits for libuv's queued writes), then the
  /// connection waits for the peer's EOF (reading is started if needed; data read
  /// meanwhile still reaches `onRead`) and closes; `onClose(.local)`. The whole
  /// sequence is bounded by `Loop.lingerTimeoutMs`, after which the handle is closed
  /// regardless. Idempotent; `close()` or `reset()` may still cut it short.
  public func shutdown() {
    guard state == .open else { return }
    closeReason = closeReason ?? .local
    // A clean TLS close: close_notify goes out after everything queued, so what is
    // queued is sealed first (nothing can be sealed after close_notify).
    if let extras, let sealer = extras.sealer {
      seal(extras, sealer)
      sealer.closing()
      seal(extras, sealer)
    }
    beginGracefulClose()
  }

  /// The single path into `uv_close`.
  func beginClose() {
    state = .closing
    uv_close(tcp.cast(), handleCloseCallback)
  }

  /// Records `error` (unless a reason was already recorded) and closes immediately.
  func fail(_ error: LoopError) {
    guard state == .open || state == .shuttingDown else { return }
    closeReason = closeReason ?? .error(error)
    beginClose()
  }

  func beginGracefulClose() {
    state = .shuttingDown
    loop.registerLinger(self)
    startReading()
    guard state == .shuttingDown else { return }
    if pending.isEmpty { startShutdownRequestIfReady() } else { flushPending() }
  }

  /// Issues `uv_shutdown` once every queued byte has been confirmed written.
  func startShutdownRequestIfReady() {
    guard state == .shuttingDown, shutdownRequest == nil, pending.isEmpty, !writeInFlight else { return }
    let request = UnsafeMutablePointer<uv_shutdown_t>.allocate(capacity: 1)
    request.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    shutdownRequest = request
    let result = uv_shutdown(request, stream, shutdownCallback)
    if result != 0 { fail(LoopError(code: result)) }
  }

  fileprivate func shutdownDidComplete(status: Int32) {
    guard status != UV_ECANCELED.rawValue else { return }
    guard status == 0 else { return fail(LoopError(code: status)) }
    shutdownCompleted = true
    if peerSentEOF && state == .shuttingDown { beginClose() }
  }

  fileprivate func peerDidSendEOF() {
    peerSentEOF = true
    isReading = false  // libuv stops reading at EOF (src/unix/stream.c, uv__stream_eof).
    switch state {
    case .open:
      closeReason = closeReason ?? .eof
      if pending.isEmpty && !writeInFlight { beginClose() } else { beginGracefulClose() }
    case .shuttingDown:
      if shutdownCompleted { beginClose() }
    case .closing, .closed:
      break
    }
  }

  /// The linger deadline passed: close whatever stage the graceful close reached.
  func lingerDidExpire() {
    if state == .shuttingDown { beginClose() }
  }

  fileprivate func deliver(_ bytes: UnsafeMutableRawBufferPointer) {
    loop.statistics.bytesRead &+= UInt64(bytes.count)
    if let handler { handler.connection(self, didRead: bytes) }
  }

  /// Frees everything libuv has finished with and reports the close, exactly once.
  func handleDidClose() {
    state = .closed
    pending.removeAll(pool: loop.ringPool)
    loop.statistics.queuedBytes -= queuedByteCount
    queuedByteCount = 0
    writeRequest?.deallocate()
    shutdownRequest?.deallocate()
    writeRequest = nil
    shutdownRequest = nil
    tcp.deallocate()
    let receiver = handler
    handler = nil
    extras?.connectCompletion = nil
    receiver?.connection(self, didCloseWith: closeReason ?? .local)
    extras?.userData = nil
  }
}

/// The delegate behind the `onRead` / `onClose` closures.
final class ClosureDelegate: TCPConnectionDelegate {
  var onRead: ((UnsafeRawBufferPointer) -> Void)?
  var onClose: ((CloseReason) -> Void)?

  func connection(_ connection: TCPConnection, didRead bytes: UnsafeMutableRawBufferPointer) {
    if let onRead { onRead(UnsafeRawBufferPointer(bytes)) }
  }

  func connection(_ connection: TCPConnection, didCloseWith reason: CloseReason) {
    onClose?(reason)
  }
}

@available(*, unavailable)
extension TCPConnection: Sendable {}

/// `uv_alloc_cb`: every read on the loop uses the one loop-wide buffer.
private func readAllocCallback(
  _ handle: UnsafeMutablePointer<uv_handle_t>?, _: Int, _ buffer: UnsafeMutablePointer<uv_buf_t>?
) {
  guard let handle, let buffer else { return }
  let loop = unretainedOwner(handle.pointee.loop.pointee.data, as: Loop.self)
  buffer.pointee = uv_buf_t(base: loop.readBuffer.assumingMemoryBound(to: CChar.self), len: Loop.readBufferSize)
}

/// `uv_read_cb`. `nread == 0` means "nothing this time" (EAGAIN), not EOF; `UV_EOF`
/// is EOF; other negatives are errors (`docs/src/stream.rst`).
private func readCallback(
  _ stream: UnsafeMutablePointer<uv_stream_t>?, _ nread: Int, _ buffer: UnsafePointer<uv_buf_t>?
) {
  guard let stream else { return }
  let connection = unretainedOwner(stream.pointee.data, as: TCPConnection.self)
  if nread > 0, let base = buffer?.pointee.base {
    connection.deliver(UnsafeMutableRawBufferPointer(start: base, count: nread))
  } else if nread == Int(UV_EOF.rawValue) {
    connection.peerDidSendEOF()
  } else if nread < 0 {
    connection.fail(LoopError(code: Int32(truncatingIfNeeded: nread)))
  }
}

/// `uv_shutdown_cb`; `data` is the connection, alive until its close callback, which
/// libuv runs only after cancelling this request.
private func shutdownCallback(_ request: UnsafeMutablePointer<uv_shutdown_t>?, _ status: Int32) {
  guard let request else { return }
  unretainedOwner(request.pointee.data, as: TCPConnection.self).shutdownDidComplete(status: status)
}
