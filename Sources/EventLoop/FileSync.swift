import CLibUV

/// `fdatasync` off the loop thread: `uv_fs_fdatasync` runs it on libuv's thread pool
/// and calls back on the loop thread (`docs/src/fs.rst`), so a disk that takes long
/// to sync (a busy or networked one) delays only the sync, not every socket. The
/// pending request keeps the loop running until it completes; the descriptor must
/// stay open until then.
public enum FileSync {
  /// Syncs `fd`'s data; `completion` gets 0 or a negative errno, exactly once, on
  /// the loop thread (at once if libuv refuses the request).
  public static func dataSync(_ fd: Int32, on loop: Loop, _ completion: @escaping (Int32) -> Void) {
    let request = UnsafeMutablePointer<uv_fs_t>.allocate(capacity: 1)
    let box = Unmanaged.passRetained(SyncCompletion(completion))
    request.pointee.data = box.toOpaque()
    let result = uv_fs_fdatasync(loop.rawLoop, request, fd, fileSyncCallback)
    if result != 0 {
      // Refused before anything was queued: no callback will come.
      box.release()
      request.deallocate()
      completion(result)
    }
  }
}

private final class SyncCompletion {
  let completion: (Int32) -> Void
  init(_ completion: @escaping (Int32) -> Void) { self.completion = completion }
}

/// `uv_fs_cb`, on the loop thread: capture-free, so it recovers the completion from
/// `req.data`; `result` is 0 or a negative errno.
private func fileSyncCallback(_ request: UnsafeMutablePointer<uv_fs_t>?) {
  guard let request else { preconditionFailure("uv_fs callback without its request") }
  let box = Unmanaged<SyncCompletion>.fromOpaque(request.pointee.data).takeRetainedValue()
  let result = Int32(truncatingIfNeeded: request.pointee.result)
  uv_fs_req_cleanup(request)
  request.deallocate()
  box.completion(result)
}
