import CLibUV

/// What `Timer` and `SignalWatcher` share: one heap-allocated libuv handle whose
/// `data` holds a +1 on this object until the close callback, an optional user
/// callback, and the close bookkeeping (idempotent `close()`, memory freed only in
/// the close callback, `docs/src/handle.rst`). Subclasses add the start/stop calls of
/// their handle type.
/// The handle is kept untyped here so the public subclasses need not expose libuv
/// types; each subclass views it as its own handle type.
public class CallbackHandle: HandleOwner {
  private let raw: UnsafeMutableRawPointer
  var callback: (() -> Void)?
  private(set) var isClosing = false
  private var isClosed = false

  /// Allocates the handle and runs `initialise` (the `uv_*_init` call) on it, then
  /// takes libuv's +1.
  init<Handle>(_ type: Handle.Type, _ what: StaticString, initialise: (UnsafeMutablePointer<Handle>) -> Int32) {
    let typed = UnsafeMutablePointer<Handle>.allocate(capacity: 1)
    raw = UnsafeMutableRawPointer(typed)
    preconditionLibUVSucceeded(initialise(typed), what)
    base.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  /// The handle as its own libuv type (the type it was initialised as).
  func handle<Handle>(as type: Handle.Type) -> UnsafeMutablePointer<Handle> {
    raw.assumingMemoryBound(to: type)
  }

  private var base: UnsafeMutablePointer<uv_handle_t> { raw.assumingMemoryBound(to: uv_handle_t.self) }

  deinit {
    precondition(isClosed, "\(type(of: self)) released before its close callback")
  }

  /// Lets `Loop.run()` return while only this handle is active (`uv_unref`), e.g. for
  /// watchdogs and housekeeping.
  public func unref() {
    guard !isClosing else { return }
    uv_unref(base)
  }

  /// Stops and closes the handle. Idempotent; safe from inside the callback.
  public func close() {
    guard !isClosing else { return }
    isClosing = true
    uv_close(base, handleCloseCallback)
  }

  func handleDidClose() {
    isClosing = true
    isClosed = true
    callback = nil
    raw.deallocate()
  }

  func fire() {
    if let callback { callback() }
  }
}

@available(*, unavailable)
extension CallbackHandle: Sendable {}
