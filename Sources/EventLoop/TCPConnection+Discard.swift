import CLibUV

extension TCPConnection {
  /// Drops every queued buffer the kernel has not started on, keeping the ones a
  /// `uv_write` has in flight and a partially written front buffer, so what follows
  /// (a close frame to a slow consumer) still starts on a frame boundary. A copy
  /// chunk holds whole frames only, so a partially written one is kept whole: at
  /// most `Loop.copyChunkBytes` of small frames still go out before the close frame.
  /// Returns the number of bytes dropped.
  @discardableResult
  public func discardUnsent() -> Int {
    let keep = unsentBoundary()
    guard pending.count > keep else { return 0 }
    var kept = WriteQueue()
    for index in 0..<keep { kept.append(pending.pointer(at: index).pointee, pool: loop.ringPool) }
    var dropped = 0
    for index in keep..<pending.count {
      let entry = pending.pointer(at: index).pointee
      dropped += entry.end - entry.offset
    }
    pending.removeAll(pool: loop.ringPool)
    pending = kept
    queuedByteCount -= dropped
    loop.statistics.queuedBytes -= dropped
    return dropped
  }

  /// How many front entries of the queue must go out before anything else: those of
  /// the `uv_write` in flight, a partially written front buffer, pinned entries (an
  /// HTTP head, `writeHead`) and sealed (TLS) entries, which carry record sequence
  /// numbers (dropping or reordering any would corrupt the stream). Every entry
  /// after them starts on a frame boundary.
  func unsentBoundary() -> Int {
    var keep = writeInFlight ? inFlightBufferCount : 0
    if keep == 0, !pending.isEmpty, pending.pointer(at: 0).pointee.offset > 0 { keep = 1 }
    if let extras {
      keep = max(keep, min(extras.pinnedCount, pending.count))
      if extras.sealer != nil { keep = max(keep, extras.sealedCount) }
    }
    return keep
  }

  /// Queues bytes that are not WebSocket frames (the HTTP 101 response, RFC 6455
  /// §4.2.2) and pins everything queued so far: a control frame queued later
  /// (`writeControl`) goes behind them and `discardUnsent` keeps them, so the peer
  /// always reads the whole head before the first frame. Frames written later may
  /// share the head's copy chunk; they then stay in order behind it as well.
  @discardableResult
  public func writeHead(_ bytes: [UInt8]) -> Bool {
    let queued = write(bytes)
    if !pending.isEmpty { ensureExtras().pinnedCount = pending.count }
    return queued
  }

  /// Queues the last bytes this side sends (a WebSocket close frame after
  /// `discardUnsent()`) whatever the cap: they are small and end the queue's growth.
  /// False when the connection is not open.
  @discardableResult
  public func writeFinal(_ bytes: [UInt8]) -> Bool {
    guard state == .open else { return false }
    let limit = outboundByteLimit
    outboundByteLimit = .max
    defer { outboundByteLimit = limit }
    return write(bytes)
  }
}

extension TCPConnection {
  /// Sets `SO_SNDBUF` (`uv_send_buffer_size`; Linux stores twice the value and stops
  /// autotuning the buffer). Bounds what the kernel holds for this socket, so that
  /// a control frame queued ahead of the relay's own queue reaches the peer after at
  /// most that much. A failure leaves the kernel's default: not worth a close.
  public func setSendBufferSize(_ bytes: Int) {
    guard state == .open, var value = Int32(exactly: bytes), value > 0 else { return }
    _ = uv_send_buffer_size(tcp.cast(), &value)
  }

  /// The kernel's `SO_SNDBUF` of this socket (after Linux's doubling), 0 if unknown.
  public var sendBufferSize: Int {
    guard state == .open else { return 0 }
    var value: Int32 = 0
    guard uv_send_buffer_size(tcp.cast(), &value) == 0 else { return 0 }
    return Int(value)
  }

  /// Queues a control frame (RFC 6455 §5.5: ping, pong) ahead of queued data, at the
  /// first frame boundary the kernel has not started on: §5.4 lets control frames be
  /// injected between the frames of a message, never inside a frame. What stays
  /// ahead of it: the `uv_write` in flight, a partially written front buffer, and
  /// sealed TLS records. Whole frames are the unit of every queued buffer (a copy
  /// chunk holds whole frames only), so any later entry starts on a boundary. The
  /// bytes count like any write, but never trip the cap: a control frame is small
  /// and a peer that cannot take it is found out by the next data write.
  @discardableResult
  public func writeControl(_ frame: OutboundBuffer) -> Bool {
    guard state == .open else { return false }
    guard frame.count > 0 else { return true }
    let keep = unsentBoundary()
    guard pending.count > keep else { return writeUncapped(frame) }
    var reordered = WriteQueue()
    for index in 0..<keep { reordered.append(pending.pointer(at: index).pointee, pool: loop.ringPool) }
    reordered.append(PendingWrite(buffer: frame), pool: loop.ringPool)
    for index in keep..<pending.count { reordered.append(pending.pointer(at: index).pointee, pool: loop.ringPool) }
    pending.removeAll(pool: loop.ringPool)
    pending = reordered
    queuedByteCount += frame.count
    loop.statistics.queuedBytes += frame.count
    markDirty()
    return true
  }

  /// `write(frame)` whatever the cap.
  private func writeUncapped(_ frame: OutboundBuffer) -> Bool {
    let limit = outboundByteLimit
    outboundByteLimit = .max
    defer { outboundByteLimit = limit }
    return write(frame)
  }
}
