// Payload handling for `WebSocketConnection`: unmasking, incremental UTF-8
// validation, message delivery, control frames and the closing handshake.

extension WebSocketConnection {
  /// Reads up to the rest of the current frame's payload; returns the bytes
  /// consumed. Text is validated chunk by chunk so an invalid byte fails the
  /// connection before the frame is complete (§8.1, Autobahn 6.4.x).
  mutating func consumePayload(
    _ bytes: UnsafeRawPointer, available: Int, emit: (WebSocketEvent) -> Void
  ) -> Int {
    let count = Swift.min(payloadRemaining, available)
    switch sink {
    case .message:
      let valid = appendUnmasked(bytes, count: count, validating: messageOpcode == .text)
      if !valid {
        fail(code: CloseCode.invalidPayload, reason: "invalid UTF-8", emit: emit)
        return count
      }
    case .control:
      control.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
      Self.unmaskTail(&control, count: count, mask: frameMask, phase: payloadConsumed)
    case .discard:
      break
    }
    payloadRemaining -= count
    payloadConsumed += count
    if payloadRemaining == 0 {
      inPayload = false
      finishFrame(emit: emit)
    }
    return count
  }

  /// Appends `count` payload bytes to the message, unmasks them in place and,
  /// for text, feeds them to the validator. Returns false on invalid UTF-8.
  mutating func appendUnmasked(_ bytes: UnsafeRawPointer, count: Int, validating: Bool) -> Bool {
    let start = message.count
    message.append(contentsOf: UnsafeRawBufferPointer(start: bytes, count: count))
    Self.unmaskTail(&message, count: count, mask: frameMask, phase: payloadConsumed)
    guard validating else { return true }
    var validator = utf8
    let valid = message.withUnsafeBytes {
      validator.feed(UnsafeRawBufferPointer(rebasing: $0[start..<start + count]))
    }
    utf8 = validator
    return valid
  }

  /// Unmasks the last `count` bytes of `buffer`, which are the payload bytes
  /// just read at masking phase `phase` (payload bytes of the frame before).
  static func unmaskTail(_ buffer: inout [UInt8], count: Int, mask: MaskKey?, phase: Int) {
    guard let mask, count > 0 else { return }
    buffer.withUnsafeMutableBytes { raw in
      let tail = raw.baseAddress! + (raw.count - count)
      applyMask(mask, phase: phase, source: tail, destination: tail, count: count)
    }
  }

  /// The current frame's payload is complete.
  mutating func finishFrame(emit: (WebSocketEvent) -> Void) {
    switch sink {
    case .discard:
      return
    case .control:
      let payload = control
      control.removeAll(keepingCapacity: true)
      handleControl(payload, emit: emit)
    case .message:
      if frameFin { deliverMessage(emit: emit) }
    }
  }

  /// Emits the reassembled message (§5.4); text must end on a character
  /// boundary (§8.1).
  mutating func deliverMessage(emit: (WebSocketEvent) -> Void) {
    let isText = messageOpcode == .text
    if isText && !utf8.isComplete {
      fail(code: CloseCode.invalidPayload, reason: "truncated UTF-8", emit: emit)
      return
    }
    let payload = message
    message = []
    messageOpcode = nil
    emit(isText ? .text(payload) : .binary(payload))
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
    message = []
    control = []
    pendingHeader = []
  }
}
