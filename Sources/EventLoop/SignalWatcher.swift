import CLibUV

/// Watches a POSIX signal on the loop (`uv_signal_t`): the callback runs on the loop
/// thread, so it may touch loop state, unlike a raw signal handler.
public final class SignalWatcher: HandleOwner {
  private let handle: UnsafeMutablePointer<uv_signal_t>
  private var callback: (() -> Void)?
  private var isClosing = false
  private var isClosed = false

  /// Starts watching `signal` (e.g. `SIGTERM`); `callback` runs once per delivery
  /// (libuv may coalesce signals that arrive together).
  public init(loop: Loop, signal: Int32, _ callback: @escaping () -> Void) {
    handle = .allocate(capacity: 1)
    self.callback = callback
    preconditionLibUVSucceeded(uv_signal_init(loop.rawLoop, handle), "uv_signal_init")
    handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
    preconditionLibUVSucceeded(uv_signal_start(handle, signalCallback, signal), "uv_signal_start")
  }

  deinit {
    precondition(isClosed, "SignalWatcher released before its close callback")
  }

  /// Lets `Loop.run()` return while only this watcher is active (`uv_unref`).
  public func unref() {
    guard !isClosing else { return }
    uv_unref(handle.cast())
  }

  /// Stops watching and closes the handle. Idempotent.
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
extension SignalWatcher: Sendable {}

private func signalCallback(_ handle: UnsafeMutablePointer<uv_signal_t>?, _: Int32) {
  guard let handle else { return }
  unretainedOwner(handle.pointee.data, as: SignalWatcher.self).fire()
}
