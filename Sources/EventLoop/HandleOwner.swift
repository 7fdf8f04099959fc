import CLibUV

/// An object that owns exactly one libuv handle and is referenced from the handle's
/// `data` field by a +1 (`Unmanaged.passRetained`) taken when the handle was
/// initialised. libuv therefore keeps the owner alive while the handle exists
/// (`docs/src/design.rst`: memory may only be freed in or after the close callback);
/// `handleCloseCallback` takes that +1 back exactly once.
protocol HandleOwner: AnyObject {
  /// Closes the handle through the owner, so its state says "closing" and a later
  /// `close()` from user code is a no-op rather than a second `uv_close` (which libuv
  /// forbids). Idempotent. `Loop.close()` calls this for every handle it sweeps.
  func close()

  /// Called exactly once, from the handle's close callback, after libuv is done with
  /// the handle: free the handle memory here, then report closure to the user.
  func handleDidClose()
}

/// The `uv_close_cb` of every handle whose `data` holds a +1 `HandleOwner`: one
/// callback for every owner type, which recovers the owner from `data`.
func handleCloseCallback(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
  guard let handle, let data = handle.pointee.data else {
    preconditionFailure("close callback for a handle without an EventLoop owner")
  }
  handle.pointee.data = nil
  // Balances the passRetained in the owner's init: the only release of libuv's +1.
  let owner = Unmanaged<AnyObject>.fromOpaque(data).takeRetainedValue()
  guard let owner = owner as? any HandleOwner else {
    preconditionFailure("handle data is not an EventLoop HandleOwner")
  }
  owner.handleDidClose()
}

extension UnsafeMutablePointer {
  /// The same address viewed as the libuv base type (`uv_handle_t`, `uv_stream_t`);
  /// libuv's handle structs start with the base struct's fields, as C casts assume.
  @inline(__always)
  func cast<Base>(to: Base.Type = Base.self) -> UnsafeMutablePointer<Base> {
    UnsafeMutablePointer<Base>(OpaquePointer(self))
  }
}

/// Reinterprets a handle or request `data` pointer stored as `passUnretained` or
/// `passRetained` as its owner, without changing its retain count.
@inline(__always)
func unretainedOwner<Owner: AnyObject>(_ data: UnsafeMutableRawPointer?, as: Owner.Type) -> Owner {
  guard let data else { preconditionFailure("libuv callback without an owner in data") }
  return Unmanaged<Owner>.fromOpaque(data).takeUnretainedValue()
}
