// Payload handling for `WebSocketConnection`: unmasking, incremental UTF-8
// validation, message delivery, control frames and the closing handshake.
import RelayPrimitives

extension WebSocketConnection {
  /// Reads up to the rest of the current frame's payload; returns the bytes
  /// consumed. Text is validated chunk by chunk so an invalid byte fails the
  /// connection before the frame is complete (§8.1, Autobahn 6.4.x).
  mutating func consumePayload(
    _ bytes: UnsafeRawPointer, available: Int, writable: Bool,
    onMessage: (Opcode, UnsafeRawBufferPointer) -> Void, emit: (WebSocketEvent) -> Void
  ) -> Int {
    let count = Swift.min(payloadRemaining, available)
    switch sink {
    case .message:
      if frameFin && messageLength == 0 && count == payloadRemaining
        && (frameMask.isNone || writable)
      {
        // A final frame wholly in the input: no copy. Unmasked (client role) it is
        // ready as it is; masked, the caller let us unmask it where it lies.
        if !frameMask.isNone {
          applyMask(
            frameMask, phase: payloadConsumed, source: bytes,
            destination: UnsafeMutableRawPointer(mutating: bytes), count: count)
        }
        deliverInPlace(bytes, count: count, onMessage: onMessage, emit: emit)
        return count
      }
      if !appendPayload(bytes, count: count) {
        fail(code: CloseCode.invalidPayload, reason: "invalid UTF-8", emit: emit)
        return count
      }
    case .control:
      control.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
      if !frameMask.isNone {
        let mask = frameMask
        let phase = payloadConsumed
        control.withUnsafeMutableBytes { raw in
          let tail = raw.baseAddress! + (raw.count - count)
          applyMask(mask, phase: phase, source: tail, destination: tail, count: count)
        }
      }
    case .discard:
      break
    }
    payloadRemaining -= count
    payloadConsumed += count
    if payloadRemaining == 0 {
      inPayload = false
      finishFrame(onMessage: onMessage, emit: emit)
    }
    return count
  }

  /// Copies `count` payload bytes into the message storage, unmasking in the
  /// same pass, and for text feeds them to the validator. False on invalid
  /// UTF-8.
  mutating func appendPayload(_ bytes: UnsafeRawPointer, count: Int) -> Bool {
    // Room for the whole rest of this frame at once (bounded by the limit).
    ensureStorage(messageLength + payloadRemaining)
    let offset = messageLength
    let mask = frameMask
    let phase = payloadConsumed
    let validating = messageOpcode == .text
    var validator = utf8
    let valid = storage.withUnsafeMutableBytes { raw -> Bool in
      let destination = raw.baseAddress! + offset
      if !mask.isNone {
        applyMask(mask, phase: phase, source: bytes, destination: destination, count: count)
      } else {
        destination.copyMemory(from: bytes, byteCount: count)
      }
      return !validating || validator.feed(UnsafeRawBufferPointer(start: destination, count: count))
    }
    utf8 = validator
    messageLength += count
    return valid
  }

  /// Delivers a final unmasked frame straight from the input buffer.
  mutating func deliverInPlace(
    _ bytes: UnsafeRawPointer, count: Int,
    onMessage: (Opcode, UnsafeRawBufferPointer) -> Void, emit: (WebSocketEvent) -> Void
  ) {
    let payload = UnsafeRawBufferPointer(start: bytes, count: count)
    let opcode = messageOpcode!
    if opcode == .text {
      var validator = utf8
      guard validator.feed(payload) && validator.isComplete else {
        let reason = validator.hasFailed ? "invalid UTF-8" : "truncated UTF-8"
        fail(code: CloseCode.invalidPayload, reason: reason, emit: emit)
        return
      }
    }
    payloadRemaining = 0
    inPayload = false
    messageOpcode = nil
    onMessage(opcode, payload)
  }

  /// The current frame's payload is complete.
  mutating func finishFrame(
    onMessage: (Opcode, UnsafeRawBufferPointer) -> Void, emit: (WebSocketEvent) -> Void
  ) {
    switch sink {
    case .discard:
      return
    case .control:
      let payload = control
      control.removeAll(keepingCapacity: true)
      handleControl(payload, emit: emit)
    case .message:
      if frameFin { deliverMessage(onMessage: onMessage, emit: emit) }
    }
  }

  /// Hands over the reassembled message (§5.4), borrowed from `storage`;
  /// text must end on a character boundary (§8.1).
  mutating func deliverMessage(
    onMessage: (Opcode, UnsafeRawBufferPointer) -> Void, emit: (WebSocketEvent) -> Void
  ) {
    let opcode = messageOpcode!
    if opcode == .text && !utf8.isComplete {
      fail(code: CloseCode.invalidPayload, reason: "truncated UTF-8", emit: emit)
      return
    }
    let length = messageLength
    messageOpcode = nil
    messageLength = 0
    storage.withUnsafeBytes { raw in
      onMessage(opcode, UnsafeRawBufferPointer(rebasing: raw[0..<length]))
    }
    if storage.count > Self.retainedStorageBytes { storage = [] }
  }

  /// Ping, pong or close, handled at once even between fragments (§5.4).
  mutating func handleControl(_ payload: [UInt8], emit: (WebSocketEvent) -> Void) {
    switch frameOpcode {
    case .ping:
      // §5.5.2: answer with a pong carrying the same payload; once we sent a
      // close we send nothing more (§5.5.1).
      if state == .open { emit(.write(encode(.pong, payload))) }
      emit(.ping(payload))
    case .pong:
      emit(.pong(payload))  // §5.5.3: unsolicited pongs need no answer
    default:
      handleClose(payload, emit: emit)
    }
  }

  /// A close frame arrived (§5.5.1, §7.1.5, §7.1.6).
  mutating func handleClose(_ payload: [UInt8], emit: (WebSocketEvent) -> Void) {
    guard let (code, reason) = parseClose(payload, emit: emit) else { return }
    let wasOpen = state == .open
    state = .closed
    releaseBuffers()
    if wasOpen {
      // Echo the code (§5.5.1). An empty close is answered with an empty
      // close: there is no code to echo, and 1005 may not be sent (§7.4.1).
      let reply = payload.isEmpty ? [] : WebSocketFrame.closePayload(code: code, reason: "")
      emit(.write(encode(.close, reply)))
    }
    emit(.closed(code: code, reason: reason, initiatedByPeer: wasOpen))
  }

  /// Validates a close payload. Returns (code, reason), with 1005 for an
  /// empty payload, or fails the connection and returns nil.
  mutating func parseClose(
    _ payload: [UInt8], emit: (WebSocketEvent) -> Void
  ) -> (UInt16, String)? {
    if payload.isEmpty { return (CloseCode.noStatusReceived, "") }
    guard payload.count >= 2 else {
      fail(code: CloseCode.protocolError, reason: "close payload of 1 byte", emit: emit)
      return nil
    }
    let code = UInt16(payload[0]) << 8 | UInt16(payload[1])
    guard CloseCode.isValidReceived(code) else {
      fail(code: CloseCode.protocolError, reason: "invalid close code", emit: emit)
      return nil
    }
    let reasonBytes = payload[2...]
    guard reasonBytes.withUnsafeBytes({ UTF8Validator.isValid($0) }) else {
      fail(code: CloseCode.invalidPayload, reason: "invalid UTF-8 in close reason", emit: emit)
      return nil
    }
    return (code, String(decoding: reasonBytes, as: UTF8.self))
  }

  /// _Fail the WebSocket Connection_ (§7.1.7): send a close with `code`
  /// unless we already sent one, then report `.closed`.
  mutating func fail(code: UInt16, reason: String, emit: (WebSocketEvent) -> Void) {
    guard state != .closed else { return }
    let wasOpen = state == .open
    state = .closed
    releaseBuffers()
    if wasOpen {
      emit(.write(encode(.close, WebSocketFrame.closePayload(code: code, reason: reason))))
    }
    emit(.closed(code: code, reason: reason, initiatedByPeer: false))
  }

  /// Nothing more will be read: free the buffers now rather than with the
  /// connection.
  mutating func releaseBuffers() {
    inPayload = false
    messageOpcode = nil
    messageLength = 0
    storage = []
    control = []
    pendingHeader.removeAll()
  }
}
