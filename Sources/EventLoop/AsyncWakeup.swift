import CLibUV

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Wakes the loop from another thread (`uv_async_t`), the one thread crossing in the
/// design. Sends are coalesced: several `send()` calls before the loop gets round to
/// it produce one callback (`docs/src/async.rst`), so the callback must drain a
/// mailbox of its own rather than count wakeups.
///
/// The `AsyncWakeup` itself is loop-bound; other threads get its `sender`.
public final class AsyncWakeup: HandleOwner {
  private let handle: UnsafeMutablePointer<uv_async_t>
  private var callback: (() -> Void)?
  private var isClosing = false
  private var isClosed = false
  /// The thread-safe side; hand it to other threads.
  public let sender: AsyncWakeupSender

  /// Initialises the handle; `callback` runs on the loop thread after `send()`.
  /// An open AsyncWakeup keeps `Loop.run()` running until `close()`.
  public init(loop: Loop, _ callback: @escaping () -> Void) {
    handle = .allocate(capacity: 1)
    self.callback = callback
    sender = AsyncWakeupSender(handle: handle)
    preconditionLibUVSucceeded(uv_async_init(loop.rawLoop, handle, asyncCallback), "uv_async_init")
    handle.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit {
    precondition(isClosed, "AsyncWakeup released before its close callback")
  }

  /// Wakes the loop. Thread-safe; equivalent to `sender.send()`.
  public func send() {
    sender.send()
  }

  /// Closes the handle. Later `sender.send()` calls are ignored. Idempotent.
  public func close() {
    guard !isClosing else { return }
    isClosing = true
    sender.invalidate()
    uv_close(handle.cast(), handleCloseCallback)
  }

  func handleDidClose() {
    isClosing = true
    isClosed = true
    // Defensive: whatever path closed the handle, no sender may touch it once freed.
    sender.invalidate()
    callback = nil
    handle.deallocate()
  }

  fileprivate func fire() {
    if let callback { callback() }
  }
}

@available(*, unavailable)
extension AsyncWakeup: Sendable {}

private func asyncCallback(_ handle: UnsafeMutablePointer<uv_async_t>?) {
  guard let handle else { return }
  unretainedOwner(handle.pointee.data, as: AsyncWakeup.self).fire()
}

/// The thread-safe half of `AsyncWakeup`: `uv_async_send` on a handle pointer guarded
/// by a mutex, so a send racing with `close()` either completes before the handle is
/// closed or becomes a no-op, and never touches freed memory.
/// `@unchecked Sendable`: the only mutable state, `handle`, is read and written under
/// `mutex`.
public final class AsyncWakeupSender: @unchecked Sendable {
  private let mutex: UnsafeMutablePointer<pthread_mutex_t>
  private var handle: UnsafeMutablePointer<uv_async_t>?

  init(handle: UnsafeMutablePointer<uv_async_t>) {
    self.handle = handle
    mutex = .allocate(capacity: 1)
    mutex.initialize(to: pthread_mutex_t())
    precondition(pthread_mutex_init(mutex, nil) == 0, "pthread_mutex_init failed")
  }

  deinit {
    pthread_mutex_destroy(mutex)
    mutex.deallocate()
  }

  /// Wakes the loop; returns false if the `AsyncWakeup` was already closed.
  @discardableResult
  public func send() -> Bool {
    pthread_mutex_lock(mutex)
    defer { pthread_mutex_unlock(mutex) }
    guard let handle else { return false }
    _ = uv_async_send(handle)
    return true
  }

  func invalidate() {
    pthread_mutex_lock(mutex)
    handle = nil
    pthread_mutex_unlock(mutex)
  }
}
