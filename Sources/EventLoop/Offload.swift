import CLibUV
import CRelayShims

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension Loop {
  /// `offload` on a thread of its own at the lowest CPU priority (nice 19, a Linux
  /// thread's own): for long work on a core the loop shares (a snapshot's join and
  /// digest). The loop and every thread of normal priority go first, so the work
  /// never lengthens a loop turn; it finishes later when the core is busy. The pool
  /// is not used: its threads also serve lookups and fsyncs, which must not inherit
  /// the lowered priority. `completion` runs on the loop thread, exactly once.
  public func offloadInBackground<T: Sendable>(
    _ work: @escaping @Sendable () -> T, _ completion: @escaping (T) -> Void
  ) {
    let job = OffloadJob(work: work, completion: completion)
    var wakeup: AsyncWakeup?
    wakeup = AsyncWakeup(loop: self) {
      wakeup?.close()
      wakeup = nil
      job.finish()
    }
    guard let sender = wakeup?.sender else { return }
    let start = Unmanaged.passRetained(BackgroundStart(job: job, sender: sender))
    var thread = pthread_t()
    guard pthread_create(&thread, nil, backgroundThreadMain, start.toOpaque()) == 0 else {
      // No thread: the work runs here, now, as `offload` does when it cannot queue.
      start.release()
      job.run()
      _ = sender.send()
      return
    }
    pthread_detach(thread)
  }

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

/// What a background thread gets: the job, and how to wake the loop when it is done
/// (the sender's mutex orders the job's result before the loop's read of it).
private final class BackgroundStart: @unchecked Sendable {
  let job: OffloadJob
  let sender: AsyncWakeupSender

  init(job: OffloadJob, sender: AsyncWakeupSender) {
    self.job = job
    self.sender = sender
  }
}

private func backgroundThreadMain(_ context: UnsafeMutableRawPointer?) -> UnsafeMutableRawPointer? {
  guard let context else { return nil }
  let start = Unmanaged<BackgroundStart>.fromOpaque(context).takeRetainedValue()
  _ = relay_thread_lowest_priority()
  start.job.run()
  _ = start.sender.send()
  return nil
}

private final class ResultBox<T>: @unchecked Sendable {
  var value: T?
}

private func offloadWorkCallback(_ request: UnsafeMutablePointer<uv_work_t>?) {
  guard let data = request?.pointee.data else { return }
  Unmanaged<OffloadJob>.fromOpaque(data).takeUnretainedValue().run()
}

private func offloadDoneCallback(_ request: UnsafeMutablePointer<uv_work_t>?, _: Int32) {
  guard let request, let data = request.pointee.data else { return }
  let job = Unmanaged<OffloadJob>.fromOpaque(data).takeRetainedValue()
  request.deallocate()
  job.finish()
}
