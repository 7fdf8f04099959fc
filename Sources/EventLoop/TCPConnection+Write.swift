import CLibUV

/// One queued write: a shared buffer and how much of it the kernel already took.
struct PendingWrite {
  let buffer: OutboundBuffer
  var offset: Int
}

/// A connection's write queue, oldest first. The front entry is held inline and a
/// ring behind it exists only while more than one buffer waits, so an idle
/// connection, or one that gets a single frame per loop turn (the usual fan-out),
/// allocates nothing for its queue.
struct WriteQueue {
  private var first: PendingWrite?
  private var rest: RingBuffer<PendingWrite>?

  var isEmpty: Bool { first == nil }
  var count: Int { first == nil ? 0 : 1 + (rest?.count ?? 0) }

  /// The entry `index` positions after the front.
  func entry(at index: Int) -> PendingWrite {
    guard index > 0 else {
      guard let first else { preconditionFailure("WriteQueue index out of range") }
      return first
    }
    guard let rest else { preconditionFailure("WriteQueue index out of range") }
    return rest.pointer(at: index - 1).pointee
  }

  /// How much of the front buffer the kernel already took.
  var frontOffset: Int { first?.offset ?? 0 }

  mutating func advanceFront(by byteCount: Int) {
    first?.offset += byteCount
  }

  mutating func append(_ entry: PendingWrite) {
    guard first != nil else {
      first = entry
      return
    }
    if let rest {
      rest.append(entry)
    } else {
      let ring = RingBuffer<PendingWrite>()
      ring.append(entry)
      rest = ring
    }
  }

  mutating func removeFirst() {
    precondition(first != nil, "removeFirst on an empty WriteQueue")
    guard let rest else {
      first = nil
      return
    }
    first = rest.removeFirst()
    if rest.isEmpty { self.rest = nil }
  }

  /// Removes (and releases) the first `n` entries.
  mutating func removeFirst(_ n: Int) {
    precondition(n <= count, "WriteQueue.removeFirst(n) beyond count")
    for _ in 0..<n { removeFirst() }
  }

  mutating func removeAll() {
    first = nil
    rest = nil
  }
}

extension TCPConnection {
  /// Queues `buffer` (by reference: fan-out enqueues one buffer to many connections).
  ///
  /// Normally nothing is written immediately: the loop's cork flushes every connection
  /// written during a turn once, gathering its queue into one `uv_try_write`
  /// (uWebSockets' cork). The cap applies to bytes the kernel has not taken: when
  /// this buffer would take the queue over `maxOutboundBytes`, the queue is offered
  /// to the kernel at once (try-write first) and only what it refuses counts, so a
  /// reader that keeps up is never mistaken for a slow one, whatever the frame size.
  ///
  /// Returns false when the connection is closing or shutting down (nothing queued),
  /// or when the queue is still over the cap after that attempt and something
  /// queued ahead of this buffer is still waiting (a lone frame larger than the cap
  /// is let through once everything before it has gone): the buffer then
  /// stays queued, so frame boundaries are intact, and the caller treats the peer as
  /// a slow consumer (`discardUnsent()`, then a close).
  @discardableResult
  public func write(_ buffer: OutboundBuffer) -> Bool {
    guard state == .open else { return false }
    guard buffer.count > 0 else { return true }
    pending.append(PendingWrite(buffer: buffer, offset: 0))
    queuedByteCount += buffer.count
    guard queuedByteCount > outboundByteLimit else {
      markDirty()
      return true
    }
    flushPending()
    // Over the cap only because of this one buffer, with everything ahead of it gone
    // to the kernel: a lone frame larger than the cap to a reader that keeps up (an
    // echo of a large message). The next write finds out whether the reader drains.
    return state == .open && (queuedByteCount <= outboundByteLimit || queuedByteCount <= buffer.count)
  }

  /// Copies `bytes` into a new `OutboundBuffer` and queues it; see `write(_: OutboundBuffer)`.
  @discardableResult
  public func write(_ bytes: [UInt8]) -> Bool {
    guard state == .open else { return false }
    return write(OutboundBuffer(bytes: bytes))
  }

  /// Flushes this connection's queue now instead of at the end of the turn.
  public func flushNow() {
    flushPending()
  }

  func markDirty() {
    guard !isDirty else { return }
    isDirty = true
    loop.addDirtyConnection(self)
  }

  /// Writes as much of the queue as the kernel takes now (`uv_try_write`, one
  /// `writev` of up to `Loop.maxGatherBuffers` buffers), then hands the remainder to
  /// one `uv_write` whose buffers stay queued (alive) until its callback. With a
  /// `uv_write` in flight this waits for its callback, which re-marks the connection.
  func flushPending() {
    isDirty = false
    guard state == .open || state == .shuttingDown, !writeInFlight, !pending.isEmpty else { return }
    loop.statistics.flushes &+= 1
    let (bufferCount, _) = gatherPending()
    loop.statistics.tryWriteCalls &+= 1
    let result = uv_try_write(stream, loop.gatherBuffers, UInt32(bufferCount))
    if result > 0 {
      consumeWritten(Int(result))
    } else if result < 0 && result != UV_EAGAIN.rawValue {
      return fail(LoopError(code: result))
    }
    if pending.isEmpty {
      startShutdownRequestIfReady()
    } else {
      submitWrite()
    }
  }

  /// Fills the loop's scratch `uv_buf_t` array from the front of the queue.
  /// Returns the number of buffers and bytes gathered.
  private func gatherPending() -> (bufferCount: Int, byteCount: Int) {
    let bufferCount = min(pending.count, Loop.maxGatherBuffers)
    var byteCount = 0
    for index in 0..<bufferCount {
      let entry = pending.entry(at: index)
      let length = entry.buffer.count - entry.offset
      let base = entry.buffer.base + entry.offset
      loop.gatherBuffers[index] = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: length)
      byteCount += length
    }
    return (bufferCount, byteCount)
  }

  /// Drops fully written buffers from the front of the queue and advances the
  /// offset of a partially written one, so the remainder goes out next.
  private func consumeWritten(_ byteCount: Int) {
    queuedByteCount -= byteCount
    loop.statistics.bytesWritten &+= UInt64(byteCount)
    var remaining = byteCount
    while remaining > 0 {
      let left = pending.entry(at: 0).buffer.count - pending.frontOffset
      if remaining >= left {
        remaining -= left
        pending.removeFirst()
      } else {
        pending.advanceFront(by: remaining)
        remaining = 0
      }
    }
  }

  /// Issues one `uv_write` for the front of the queue, reusing the connection's
  /// write request (allocated once): at most one write is in flight at a time.
  private func submitWrite() {
    let (bufferCount, byteCount) = gatherPending()
    let request = writeRequest ?? .allocate(capacity: 1)
    writeRequest = request
    // Unretained: libuv's +1 on the handle keeps self alive until the close
    // callback, which libuv runs only after this request's callback.
    request.pointee.data = Unmanaged.passUnretained(self).toOpaque()
    let result = uv_write(request, stream, loop.gatherBuffers, UInt32(bufferCount), writeCallback)
    guard result == 0 else { return fail(LoopError(code: result)) }
    loop.statistics.writeRequests &+= 1
    writeInFlight = true
    inFlightBufferCount = bufferCount
    inFlightByteCount = byteCount
  }

  fileprivate func writeDidComplete(status: Int32) {
    writeInFlight = false
    // Cancelled: the handle is closing; the queue is released in the close callback.
    guard status != UV_ECANCELED.rawValue else { return }
    guard status == 0 else { return fail(LoopError(code: status)) }
    pending.removeFirst(inFlightBufferCount)
    queuedByteCount -= inFlightByteCount
    loop.statistics.bytesWritten &+= UInt64(inFlightByteCount)
    inFlightBufferCount = 0
    inFlightByteCount = 0
    if pending.isEmpty { startShutdownRequestIfReady() } else { markDirty() }
  }
}

/// `uv_write_cb`. Runs before the handle's close callback even when the write was
/// cancelled by `uv_close` (`docs/src/handle.rst`), so the connection is still alive.
private func writeCallback(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
  guard let request else { return }
  unretainedOwner(request.pointee.data, as: TCPConnection.self).writeDidComplete(status: status)
}
