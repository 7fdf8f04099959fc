import CLibUV

/// A libuv timer (`uv_timer_t`). Timeouts are in the loop's millisecond clock
/// (`Loop.nowMs`), measured from the cached loop time (`docs/src/timer.rst`). The handle
/// holds a +1 on the timer until its close callback; call `close()` when done.
public final class Timer: HandleOwner {
  private let handle: UnsafeMutablePointer<uv_timer_t>
  private var callback: (() -> Void)?
  private var isClosing = false
  private var isClosed = false

  /// Initialises a stopped timer on `loop`.
  public init(loop: Loop) {
    handle = .allocate(capacity: 1)
    preconditionLibUVSucceeded(uv_timer_init(loop.rawLoop, handle), "uv_timer_init")
    handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit {
    precondition(isClosed, "Timer released before its close callback")
  }

  /// (Re)starts the timer: `callback` runs after `afterMs`, then every `repeatMs` if non-zero.
  public func start(afterMs: UInt64, repeatMs: UInt64 = 0, _ callback: @escaping () -> Void) {
    precondition(!isClosing, "start() on a closed Timer")
    self.callback = callback
    preconditionLibUVSucceeded(uv_timer_start(handle, timerCallback, afterMs, repeatMs), "uv_timer_start")
  }

  /// Stops the timer; it can be started again.
  public func stop() {
    guard !isClosing else { return }
    uv_timer_stop(handle)
  }

  /// Lets `Loop.run()` return while only this timer is active (`uv_unref`), e.g. for
  /// watchdogs and housekeeping.
  public func unref() {
    guard !isClosing else { return }
    uv_unref(handle.cast())
  }

  /// Stops and closes the timer. Idempotent; safe from inside the callback.
  public func close() {
    guard !isClosing else { return }
    isClosing = true
    uv_close(handle.cast(), handleCloseCallback)
  }

  func handleDidClose() {
    isClosing = true
    isClosed = true
    callback = nil
    handle.deallocate()
  }

  fileprivate func fire() {
    if let callback { callback() }
  }
}

@available(*, unavailable)
extension Timer: Sendable {}

private func timerCallback(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
  guard let handle else { return }
  unretainedOwner(handle.pointee.data, as: Timer.self).fire()
}
