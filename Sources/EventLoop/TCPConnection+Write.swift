import CLibUV
public import RelayPrimitives

/// One queued write: a buffer, how much of it the kernel already took (`offset`) and
/// where its queued bytes end (`end`: the buffer's count, or for a copy chunk how
/// far it is filled).
struct PendingWrite {
  let buffer: OutboundBuffer
  var offset: Int
  var end: Int

  init(buffer: OutboundBuffer) {
    self.buffer = buffer
    self.offset = 0
    self.end = buffer.count
  }

  init(chunk: OutboundBuffer, filled: Int) {
    self.buffer = chunk
    self.offset = 0
    self.end = filled
  }
}

/// A connection's write queue, oldest first. Its ring exists only while something
/// waits: it comes from the loop's `RingPool` on the first append and goes back when
/// the queue empties, so an idle connection holds nothing for its queue, and a fan-out
/// that queues frames to a thousand members every turn reuses the same rings instead
/// of allocating and freeing one per member per turn.
///
/// The ring is held unmanaged (one +1 while non-nil, returned in `giveBack`) and the
/// pool is only evaluated when a ring changes hands: a plain optional reference was
/// retained and released around every append and removal, which cost more than the
/// queue work itself. Copying a non-empty queue would share that +1, so the owner
/// never copies one (`discardUnsent` empties the old queue before replacing it).
struct WriteQueue {
  private var ring: Unmanaged<RingBuffer<PendingWrite>>?

  var isEmpty: Bool { ring == nil }
  var count: Int { ring?._withUnsafeGuaranteedRef { $0.count } ?? 0 }

  /// The entry `index` positions after the front, in place; valid until the next
  /// append or removal.
  func pointer(at index: Int) -> UnsafeMutablePointer<PendingWrite> {
    guard let ring else { preconditionFailure("WriteQueue index out of range") }
    return ring._withUnsafeGuaranteedRef { $0.pointer(at: index) }
  }

  mutating func append(_ entry: PendingWrite, pool: @autoclosure () -> RingPool) {
    if let ring {
      ring._withUnsafeGuaranteedRef { $0.append(entry) }
      return
    }
    let fresh = pool().take()
    fresh.append(entry)
    ring = Unmanaged.passRetained(fresh)
  }

  /// Removes (and releases) the first `n` entries.
  mutating func removeFirst(_ n: Int = 1, pool: @autoclosure () -> RingPool) {
    guard n > 0 else { return }
    guard let ring else { preconditionFailure("WriteQueue.removeFirst(n) beyond count") }
    let emptied = ring._withUnsafeGuaranteedRef { queue in
      queue.removeFirst(n)
      return queue.isEmpty
    }
    if emptied { giveBack(to: pool()) }
  }

  mutating func removeAll(pool: @autoclosure () -> RingPool) {
    guard let ring else { return }
    ring._withUnsafeGuaranteedRef { $0.removeAll() }
    giveBack(to: pool())
  }

  private mutating func giveBack(to pool: RingPool) {
    guard let ring else { return }
    self.ring = nil
    pool.give(ring.takeRetainedValue())
  }
}

/// The copy chunks of one loop (see `Loop.copyLimit`): a chunk goes back here when
/// the kernel has taken all of it, so a fan-out turn reuses the previous turn's
/// chunks. At most `limit` chunks exist at once; past that a write keeps its frame
/// by reference instead. A burst to more connections than that (a join storm's
/// events) therefore allocates and frees no chunks: chunks freed between
/// long-lived connection objects fragment the heap, and every idle connection then
/// pays for it in resident memory (Benchmarks/results/fanout-kernel.md, section 3).
final class ChunkPool {
  private var spare: [OutboundBuffer] = []
  private let limit: Int
  /// Chunks in existence: queued, or spare here.
  private var live = 0

  init(limit: Int) { self.limit = limit }

  /// A chunk, or nil when `limit` chunks are already in use.
  func take() -> OutboundBuffer? {
    if let chunk = spare.popLast() { return chunk }
    guard live < limit else { return nil }
    live += 1
    return OutboundBuffer(copyChunkOf: self)
  }

  /// `chunk` must be a copy chunk no queue refers to any more.
  func give(_ chunk: OutboundBuffer) {
    spare.append(chunk)
  }

  /// A chunk was freed (its queue was dropped with it).
  func chunkGone() { live -= 1 }
}

/// Spare write-queue rings of one loop (see `WriteQueue`). Bounded, so a burst to many
/// connections does not leave memory parked here for ever.
final class RingPool {
  private var spare: [RingBuffer<PendingWrite>] = []
  private let limit: Int

  init(limit: Int) { self.limit = limit }

  func take() -> RingBuffer<PendingWrite> {
    spare.popLast() ?? RingBuffer<PendingWrite>()
  }

  /// `ring` must be empty. Rings that grew past their initial size are not kept.
  func give(_ ring: RingBuffer<PendingWrite>) {
    guard spare.count < limit, ring.capacity <= RingBuffer<PendingWrite>.defaultCapacity else { return }
    spare.append(ring)
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
  ///
  /// A buffer of at most `Loop.copyLimit` bytes is copied into the connection's copy
  /// chunk instead of being referenced (see `Loop.copyLimit`); larger ones are shared.
  @discardableResult
  public func write(_ buffer: OutboundBuffer) -> Bool {
    guard state == .open else { return false }
    guard buffer.count > 0 else { return true }
    if buffer.count <= Loop.copyLimit {
      appendCopy(of: buffer.base, count: buffer.count, shared: buffer)
    } else {
      pending.append(PendingWrite(buffer: buffer), pool: loop.ringPool)
    }
    return didQueue(buffer.count)
  }

  /// Accounts for `count` bytes just queued and applies the cap; see `write(_: OutboundBuffer)`.
  private func didQueue(_ count: Int) -> Bool {
    queuedByteCount += count
    loop.statistics.queuedBytes += count
    guard queuedByteCount > outboundByteLimit else {
      markDirty()
      return true
    }
    flushPending()
    // Over the cap only because of this one buffer, with everything ahead of it gone
    // to the kernel: a lone frame larger than the cap to a reader that keeps up (an
    // echo of a large message). The next write finds out whether the reader drains.
    return state == .open && (queuedByteCount <= outboundByteLimit || queuedByteCount <= count)
  }

  /// Copies `count` bytes to the end of the queue: into the last copy chunk when it
  /// has room and is not part of a `uv_write` in flight (libuv holds that chunk's
  /// `uv_buf_t`, so bytes added to it would not be sent), else into a fresh chunk.
  /// Sealed (TLS) entries are never chunks, so plaintext is never added to them.
  /// `shared`: the buffer the bytes come from, queued by reference if no chunk is free.
  private func appendCopy(of source: UnsafeRawPointer, count: Int, shared: OutboundBuffer? = nil) {
    let queued = pending.count
    if queued > 0, !(writeInFlight && queued <= inFlightBufferCount) {
      let tail = pending.pointer(at: queued - 1)
      if tail.pointee.buffer.isCopyChunk, tail.pointee.end + count <= Loop.copyChunkBytes {
        (tail.pointee.buffer.base + tail.pointee.end).copyMemory(from: source, byteCount: count)
        tail.pointee.end += count
        return
      }
    }
    guard let chunk = loop.chunkPool.take() else {
      // Every chunk is in use: this frame is queued by reference after all.
      let own = shared ?? OutboundBuffer(count: count) { $0.baseAddress!.copyMemory(from: source, byteCount: count) }
      pending.append(PendingWrite(buffer: own), pool: loop.ringPool)
      return
    }
    chunk.base.copyMemory(from: source, byteCount: count)
    pending.append(PendingWrite(chunk: chunk, filled: count), pool: loop.ringPool)
  }

  /// Queues a copy of `bytes`; see `write(_: OutboundBuffer)`. Up to `Loop.copyLimit`
  /// bytes go straight into the copy chunk, without a buffer of their own.
  @discardableResult
  public func write(_ bytes: [UInt8]) -> Bool {
    guard state == .open else { return false }
    guard bytes.count <= Loop.copyLimit else { return write(OutboundBuffer(bytes: bytes)) }
    guard !bytes.isEmpty else { return true }
    bytes.withUnsafeBytes { appendCopy(of: $0.baseAddress!, count: $0.count) }
    return didQueue(bytes.count)
  }

  /// Flushes this connection's queue now instead of at the end of the turn.
  public func flushNow() {
    flushPending()
  }

  /// Flushes this connection first in the next pass of the cork, whatever the pass's
  /// budget (`Loop.flushBudgetNs`): for a reply, which must not wait behind a fan-out.
  public func flushFirst() {
    guard state == .open || state == .shuttingDown, !pending.isEmpty else { return }
    markDirty()
    loop.addUrgentConnection(self)
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
    if let extras, let sealer = extras.sealer, state == .open || state == .shuttingDown { seal(extras, sealer) }
    guard state == .open || state == .shuttingDown, !writeInFlight, !pending.isEmpty else { return }
    loop.statistics.flushes &+= 1
    let (bufferCount, byteCount) = gatherPending()
    loop.statistics.tryWriteCalls &+= 1
    let result: Int32
    if bufferCount > 1, byteCount <= Loop.coalesceLimit {
      // Several small frames (a fan-out turn): one contiguous write (see coalesceLimit).
      var offset = 0
      for index in 0..<bufferCount {
        let piece = loop.gatherBuffers[index]
        (loop.coalesceBuffer + offset).copyMemory(from: piece.base, byteCount: piece.len)
        offset += piece.len
      }
      var whole = uv_buf_t(base: loop.coalesceBuffer.assumingMemoryBound(to: CChar.self), len: byteCount)
      result = uv_try_write(stream, &whole, 1)
    } else {
      result = uv_try_write(stream, loop.gatherBuffers, UInt32(bufferCount))
    }
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

  /// Fills the loop's scratch `uv_buf_t` array from the front of the queue, at most
  /// `maxBytes` (but at least one buffer). Returns the number of buffers and bytes.
  private func gatherPending(maxBytes: Int = .max) -> (bufferCount: Int, byteCount: Int) {
    var bufferCount = 0
    var byteCount = 0
    for index in 0..<min(pending.count, Loop.maxGatherBuffers) {
      guard index == 0 || byteCount < maxBytes else { break }
      bufferCount += 1
      let entry = pending.pointer(at: index)
      let length = entry.pointee.end - entry.pointee.offset
      let base = entry.pointee.buffer.base + entry.pointee.offset
      loop.gatherBuffers[index] = uv_buf_t(base: base.assumingMemoryBound(to: CChar.self), len: length)
      byteCount += length
    }
    return (bufferCount, byteCount)
  }

  /// Drops fully written buffers from the front of the queue and advances the
  /// offset of a partially written one, so the remainder goes out next.
  private func consumeWritten(_ byteCount: Int) {
    let before = pending.count
    defer { forgetFront(before - pending.count) }
    queuedByteCount -= byteCount
    loop.statistics.queuedBytes -= byteCount
    loop.statistics.bytesWritten &+= UInt64(byteCount)
    var remaining = byteCount
    while remaining > 0 {
      let entry = pending.pointer(at: 0)
      let left = entry.pointee.end - entry.pointee.offset
      if remaining >= left {
        remaining -= left
        if entry.pointee.buffer.isCopyChunk { loop.chunkPool.give(entry.pointee.buffer) }
        pending.removeFirst(pool: loop.ringPool)
      } else {
        entry.pointee.offset += remaining
        remaining = 0
      }
    }
  }

  /// Issues one `uv_write` for the front of the queue, reusing the connection's
  /// write request (allocated once): at most one write is in flight at a time.
  private func submitWrite() {
    // Bounded: a uv_write cannot be taken back, so what it holds is what a slow
    // consumer must still read before the close frame that follows (RFC 6455 §7.1.1).
    let (bufferCount, byteCount) = gatherPending(maxBytes: Loop.maxInFlightBytes)
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
    pending.removeFirst(inFlightBufferCount, pool: loop.ringPool)
    forgetFront(inFlightBufferCount)
    queuedByteCount -= inFlightByteCount
    loop.statistics.queuedBytes -= inFlightByteCount
    loop.statistics.bytesWritten &+= UInt64(inFlightByteCount)
    inFlightBufferCount = 0
    inFlightByteCount = 0
    if pending.isEmpty { startShutdownRequestIfReady() } else { markDirty() }
    if state == .open || state == .shuttingDown { handler?.connectionDidDrain(self) }
  }
}

/// `uv_write_cb`. Runs before the handle's close callback even when the write was
/// cancelled by `uv_close` (`docs/src/handle.rst`), so the connection is still alive.
private func writeCallback(_ request: UnsafeMutablePointer<uv_write_t>?, _ status: Int32) {
  guard let request else { return }
  unretainedOwner(request.pointee.data, as: TCPConnection.self).writeDidComplete(status: status)
}


extension TCPConnection {
  /// Encrypts what `write` queues (TLS); set once, before anything is written.
  public var sealer: (any OutboundSealer)? {
    get { extras?.sealer }
    set { ensureExtras().sealer = newValue }
  }

  /// Asks for a flush at the end of this turn even with nothing queued: the sealer
  /// has output of its own (a handshake message, an alert).
  public func flushSoon() {
    guard state == .open || state == .shuttingDown else { return }
    markDirty()
  }

  /// Replaces the unsealed (plaintext) tail of the queue by its ciphertext, plus
  /// whatever the sealer produced on its own, as one buffer.
  func seal(_ extras: Extras, _ sealer: any OutboundSealer) {
    var plaintextBytes = 0
    if pending.count > extras.sealedCount {
      for index in extras.sealedCount..<pending.count {
        let entry = pending.pointer(at: index).pointee
        let length = entry.end - entry.offset
        plaintextBytes += length
        sealer.seal(UnsafeRawBufferPointer(start: entry.buffer.base + entry.offset, count: length))
      }
    }
    guard let sealed = sealer.takeSealed() else { return fail(LoopError(code: UV_EPROTO.rawValue)) }
    if plaintextBytes > 0 {
      var kept = WriteQueue()
      for index in 0..<extras.sealedCount { kept.append(pending.pointer(at: index).pointee, pool: loop.ringPool) }
      pending.removeAll(pool: loop.ringPool)
      pending = kept
    }
    if !sealed.isEmpty { pending.append(PendingWrite(buffer: OutboundBuffer(bytes: sealed)), pool: loop.ringPool) }
    extras.sealedCount = pending.count
    extras.pinnedCount = 0  // sealed now, which keeps them in front as well
    queuedByteCount += sealed.count - plaintextBytes
    loop.statistics.queuedBytes += sealed.count - plaintextBytes
  }

  /// `count` buffers left the front of the queue.
  func forgetFront(_ count: Int) {
    guard let extras else { return }
    extras.pinnedCount = max(0, extras.pinnedCount - count)
    guard extras.sealer != nil else { return }
    extras.sealedCount = max(0, extras.sealedCount - count)
  }
}
