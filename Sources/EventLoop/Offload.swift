import CLibUV
import CRelayShims

extension Loop {
  /// Runs `work` on libuv's thread pool (`uv_queue_work`, `docs/src/threadpool.rst`)
  /// and then `completion` with its result on the loop thread: for work that would
  /// stall every connection of the loop if it ran there (joining and digesting a
  /// snapshot of hundreds of megabytes). `work` gets only what it captures, which must
  /// be Sendable: it must not touch the loop or anything the loop owns.
  /// The pending request keeps the loop running until `completion` has run; it runs
  /// exactly once (also when the work could not be queued: then on this thread, now).
  public func offload<T: Sendable>(_ work: @escaping @Sendable () -> T, _ completion: @escaping (T) -> Void) {
    let request = UnsafeMutablePointer<uv_work_t>.allocate(capacity: 1)
    let job = Unmanaged.passRetained(OffloadJob(work: work, completion: completion))
    request.pointee.data = job.toOpaque()
    guard uv_queue_work(rawLoop, request, offloadWorkCallback, offloadDoneCallback) == 0 else {
      // Refused before anything was queued: no callback will come.
      request.deallocate()
      let taken = job.takeRetainedValue()
      taken.run()
      taken.finish()
      return
    }
  }
}

/// One `uv_queue_work` request: the work, its result and the completion. libuv calls
/// `work` on a pool thread, then `after_work` on the loop thread once the work has
/// returned (its queue hand-over orders the two), so `result` is written by one
/// thread and read by the other strictly afterwards: hence `@unchecked Sendable`.
/// Kept alive by one Unmanaged +1 in `req.data`, released in `after_work`.
private final class OffloadJob: @unchecked Sendable {
  private let runWork: () -> Void
  private let deliver: () -> Void

  init<T: Sendable>(work: @escaping @Sendable () -> T, completion: @escaping (T) -> Void) {
    let box = ResultBox<T>()
    runWork = { box.value = work() }
    deliver = {
      guard let value = box.value else { preconditionFailure("offloaded work finished without a result") }
      completion(value)
    }
  }

  func run() { runWork() }
  func finish() { deliver() }
}

private final class ResultBox<T>: @unchecked Sendable {
  var value: T?
}

private func offloadWorkCallback(_ request: UnsafeMutablePointer<uv_work_t>?) {
  guard let data = request?.pointee.data else { return }
  Loop.backgroundPriority()
  Unmanaged<OffloadJob>.fromOpaque(data).takeUnretainedValue().run()
}

extension Loop {
  /// The nice value of a pool thread that ran offloaded work.
  public static let backgroundNice: Int32 = 10

  /// Offloaded work is background work (a snapshot's join and digest, freeing big
  /// buffers): it must not take the core from an event loop, this process's or
  /// another's on the same core. The pool thread that runs it yields to them (a
  /// higher nice value, the thread's own on Linux), while still getting its share
  /// when they are busy, so a snapshot is late rather than never. Raising one's own
  /// nice value needs no privilege; it is never lowered again: the pool's other jobs
  /// here wait on the disk or the network (a data dir's `fdatasync`, a resolver), not
  /// on the CPU. Set at every job (one system call beside work of milliseconds).
  static func backgroundPriority() {
    _ = relay_thread_set_nice(backgroundNice)
  }

  /// The calling thread's nice value (for tests).
  public static func threadNice() -> Int32 { relay_thread_nice() }
}


private func offloadDoneCallback(_ request: UnsafeMutablePointer<uv_work_t>?, _: Int32) {
  guard let request, let data = request.pointee.data else { return }
  let job = Unmanaged<OffloadJob>.fromOpaque(data).takeRetainedValue()
  request.deallocate()
  job.finish()
}

/// A value handed from the loop thread to offloaded work, taken exactly once: by the
/// work (on a pool thread, through `uv_queue_work`'s ordering) or, when the work is
/// never queued, by the loop. Whoever takes it holds the last reference, so a big
/// value (a snapshot's parts or bytes) is freed where it is taken, not where the box
/// happens to die. `@unchecked Sendable`: one side writes it before queueing, the
/// other takes it after; never both at once.
public final class Handoff<T: Sendable>: @unchecked Sendable {
  private var value: T?

  public init(_ value: T) { self.value = value }

  /// The value; nil once taken.
  public func take() -> T? {
    defer { value = nil }
    return value
  }
}

extension Loop {
  /// Drops `box`'s value on libuv's thread pool: freeing a buffer of hundreds of
  /// megabytes (`munmap`, the allocator's consolidation under its arena lock) would
  /// otherwise stall the loop. Nothing else may hold the value.
  public func release<T: Sendable>(_ box: Handoff<T>) {
    offload({ _ = box.take() }) { _ in }
  }
}
