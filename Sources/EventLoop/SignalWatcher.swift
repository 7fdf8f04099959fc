import CLibUV

/// Watches a POSIX signal on the loop (`uv_signal_t`): the callback runs on the loop
/// thread, so it may touch loop state, unlike a raw signal handler.
public final class SignalWatcher: CallbackHandle {
  private var handle: UnsafeMutablePointer<uv_signal_t> { handle(as: uv_signal_t.self) }

  /// Starts watching `signal` (e.g. `SIGTERM`); `callback` runs once per delivery
  /// (libuv may coalesce signals that arrive together).
  public init(loop: Loop, signal: Int32, _ callback: @escaping () -> Void) {
    super.init(uv_signal_t.self, "uv_signal_init") { uv_signal_init(loop.rawLoop, $0) }
    self.callback = callback
    preconditionLibUVSucceeded(uv_signal_start(handle, signalCallback, signal), "uv_signal_start")
  }
}

private func signalCallback(_ handle: UnsafeMutablePointer<uv_signal_t>?, _: Int32) {
  guard let handle else { return }
  unretainedOwner(handle.pointee.data, as: SignalWatcher.self).fire()
}
