import CLibUV
public import RelayPrimitives

/// A libuv timer (`uv_timer_t`). Timeouts are in the loop's millisecond clock
/// (`Loop.nowMs`), measured from the cached loop time (`docs/src/timer.rst`). The handle
/// holds a +1 on the timer until its close callback; call `close()` when done.
public final class Timer: CallbackHandle {
  private var handle: UnsafeMutablePointer<uv_timer_t> { handle(as: uv_timer_t.self) }

  /// Initialises a stopped timer on `loop`.
  public init(loop: Loop) {
    super.init(uv_timer_t.self, "uv_timer_init") { uv_timer_init(loop.rawLoop, $0) }
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

  /// Does what `DeadlineTimer` decided for the core's next deadline; `fire` runs
  /// when it elapses (and tells the `DeadlineTimer` it fired).
  public func follow(_ change: DeadlineTimer.Change, _ fire: @escaping () -> Void) {
    switch change {
    case .keep: break
    case .stop: stop()
    case .start(let afterMs): start(afterMs: afterMs, fire)
    }
  }
}

private func timerCallback(_ handle: UnsafeMutablePointer<uv_timer_t>?) {
  guard let handle else { return }
  unretainedOwner(handle.pointee.data, as: Timer.self).fire()
}
