extension TCPConnection {
  /// Drops every queued buffer the kernel has not started on, keeping the ones a
  /// `uv_write` has in flight and a partially written front buffer, so what follows
  /// (a close frame to a slow consumer) still starts on a frame boundary. A copy
  /// chunk holds whole frames only, so a partially written one is kept whole: at
  /// most `Loop.copyChunkBytes` of small frames still go out before the close frame.
  /// Returns the number of bytes dropped.
  @discardableResult
  public func discardUnsent() -> Int {
    var keep = writeInFlight ? inFlightBufferCount : 0
    if keep == 0, !pending.isEmpty, pending.pointer(at: 0).pointee.offset > 0 { keep = 1 }
    // Sealed (TLS) bytes carry record sequence numbers: dropping any would corrupt
    // the stream, so only plaintext not yet sealed goes.
    if let extras, extras.sealer != nil { keep = max(keep, extras.sealedCount) }
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
