// The WebSocket connection state machine after the opening handshake
// (RFC 6455 §5 framing, §5.4 fragmentation, §5.5 control frames, §7 closing,
// §8.1 UTF-8). Sans-I/O: bytes in, events out; any split of the input gives
// the same events.

/// One WebSocket connection's protocol state, for either role.
public struct WebSocketConnection {
  /// Where the closing handshake stands (§7).
  public enum State: Sendable, Equatable {
    /// Messages flow both ways.
    case open
    /// We sent a close frame and await the peer's (§7.1.2).
    case closing
    /// Handshake complete or connection failed: ignore all further input.
    case closed
  }

  /// What the payload of the frame being read is for.
  enum PayloadSink {
    case message  // a text/binary data frame: into `message`
    case control  // ping/pong/close: into `control`
    case discard  // a data frame arriving while closing (§7.1.2 onward)
  }

  public internal(set) var state: State = .open
  public let role: WebSocketRole
  /// Largest message accepted (sum of fragments); beyond it, close 1009.
  public let maxMessageBytes: Int
  var maskGenerator: MaskGenerator

  // A header split across receive() calls is assembled here (≤ 14 bytes).
  var pendingHeader: [UInt8] = []

  // The frame whose payload is being read.
  var inPayload = false
  var frameOpcode: Opcode = .continuation
  var frameFin = true
  var frameMask: MaskKey?
  var payloadRemaining = 0
  /// Payload bytes of this frame already consumed: the masking phase (§5.3).
  var payloadConsumed = 0
  var sink = PayloadSink.discard

  // The data message being reassembled (§5.4).
  var messageOpcode: Opcode?
  var message: [UInt8] = []
  var utf8 = UTF8Validator()
  var control: [UInt8] = []

  /// `maskSeed` seeds the client-role masking keys; pass a random value
  /// from a CSPRNG in production (§10.3), anything in tests.
  public init(
    role: WebSocketRole, maxMessageBytes: Int = 65_536,
    maskSeed: UInt64 = 0x5DEE_CE66_D1CE_4E5B
  ) {
    precondition(maxMessageBytes >= 0, "maxMessageBytes must not be negative")
    self.role = role
    self.maxMessageBytes = maxMessageBytes
    self.maskGenerator = MaskGenerator(seed: maskSeed)
    pendingHeader.reserveCapacity(14)
  }

  /// Feeds inbound bytes. Events go to `emit` in order. Handles any split of
  /// the input, down to one byte per call. Input after `.closed` is ignored.
  public mutating func receive(
    _ bytes: UnsafeRawBufferPointer, emit: (WebSocketEvent) -> Void
  ) {
    guard let base = bytes.baseAddress else { return }
    let count = bytes.count
    var offset = 0
    while offset < count && state != .closed {
      let available = count - offset
      if inPayload {
        offset += consumePayload(base + offset, available: available, emit: emit)
      } else {
        offset += consumeHeader(base + offset, available: available, emit: emit)
      }
    }
  }

  /// Array convenience for `receive(_:emit:)`.
  public mutating func receive(_ bytes: [UInt8], emit: (WebSocketEvent) -> Void) {
    bytes.withUnsafeBytes { receive($0, emit: emit) }
  }

  /// Starts a closing handshake we initiate (§7.1.2): returns the close frame
  /// to send and moves to `.closing`; the peer's close later completes it
  /// (`.closed`). Returns [] when not open (calling twice is a no-op).
  public mutating func close(code: UInt16, reason: String) -> [UInt8] {
    guard state == .open else { return [] }
    state = .closing
    // Data frames are discarded from now on; drop a half-built message.
    messageOpcode = nil
    message = []
    return encode(.close, WebSocketFrame.closePayload(code: code, reason: reason))
  }

  /// Encodes one complete outbound frame for this role: masked with a fresh
  /// key as a client (§5.3), unmasked as a server (§5.1).
  public mutating func encode(_ opcode: Opcode, _ payload: [UInt8]) -> [UInt8] {
    WebSocketFrame.encode(opcode: opcode, payload: payload, fin: true, mask: nextMask())
  }

  /// Like `encode(_:_:)` for a payload the caller already holds in memory.
  public mutating func encode(_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) -> [UInt8] {
    WebSocketFrame.encode(opcode: opcode, payload: payload, fin: true, mask: nextMask())
  }

  /// The mask to use for the next outbound frame: nil for a server.
  public mutating func nextMask() -> UInt32? {
    role == .client ? maskGenerator.next() : nil
  }
}

// MARK: - Headers

extension WebSocketConnection {
  /// Reads a frame header; returns the bytes consumed. Parses straight from
  /// the input when the whole header is there, else assembles it byte-wise.
  mutating func consumeHeader(
    _ bytes: UnsafeRawPointer, available: Int, emit: (WebSocketEvent) -> Void
  ) -> Int {
    if pendingHeader.isEmpty && available >= 2 {
      let size = FrameHeader.size(secondByte: bytes.load(fromByteOffset: 1, as: UInt8.self))
      if available >= size {
        beginFrame(FrameHeader(parsing: bytes), emit: emit)
        return size
      }
    }
    var used = 0
    while used < available {
      pendingHeader.append(bytes.load(fromByteOffset: used, as: UInt8.self))
      used += 1
      if pendingHeader.count >= 2
        && pendingHeader.count == FrameHeader.size(secondByte: pendingHeader[1])
      {
        let header = pendingHeader.withUnsafeBytes { FrameHeader(parsing: $0.baseAddress!) }
        pendingHeader.removeAll(keepingCapacity: true)
        beginFrame(header, emit: emit)
        break
      }
    }
    return used
  }

  /// Applies the acceptance rules to a new header, then prepares to read
  /// its payload (or finishes it at once when empty).
  mutating func beginFrame(_ header: FrameHeader, emit: (WebSocketEvent) -> Void) {
    if let (code, reason) = violation(header) {
      fail(code: code, reason: reason, emit: emit)
      return
    }
    let opcode = Opcode(rawValue: header.opcodeValue)!
    frameOpcode = opcode
    frameFin = header.fin
    frameMask = header.mask
    // The header checks bound the length (≤ 125, ≤ maxMessageBytes, or a
    // discarded frame with the top bit clear), so it fits in an Int.
    payloadRemaining = Int(header.payloadLength)
    payloadConsumed = 0
    sink = chooseSink(opcode)
    if sink == .message { prepareMessage(opcode, adding: payloadRemaining) }
    if payloadRemaining == 0 {
      finishFrame(emit: emit)
    } else {
      inPayload = true
    }
  }

  func chooseSink(_ opcode: Opcode) -> PayloadSink {
    if opcode.isControl { return .control }
    return state == .open ? .message : .discard
  }

  /// Starts or extends the message and grows its buffer geometrically, so
  /// many small fragments do not cost quadratic copying.
  mutating func prepareMessage(_ opcode: Opcode, adding count: Int) {
    if opcode != .continuation {
      messageOpcode = opcode
      utf8.reset()
    }
    let needed = message.count + count
    if needed > message.capacity {
      message.reserveCapacity(Swift.max(needed, message.capacity * 2))
    }
  }

  /// The first rule a header breaks, as (close code, reason), or nil.
  func violation(_ header: FrameHeader) -> (UInt16, String)? {
    // §5.2: RSV bits must be 0 unless an extension defines them; we
    // negotiate none.
    if header.reservedBits != 0 { return (CloseCode.protocolError, "reserved bits set") }
    // §5.2: reserved opcodes must fail the connection.
    guard let opcode = Opcode(rawValue: header.opcodeValue) else {
      return (CloseCode.protocolError, "reserved opcode")
    }
    // §5.1: clients mask every frame, servers mask none.
    if (header.mask != nil) != (role == .server) {
      return (CloseCode.protocolError, role == .server ? "unmasked frame" : "masked frame")
    }
    // §5.2: the most significant bit of a 64-bit length must be 0.
    if header.payloadLength >> 63 != 0 { return (CloseCode.protocolError, "bad length") }
    if opcode.isControl { return controlViolation(header) }
    if state != .open { return nil }  // discarded while closing
    return dataViolation(header, opcode)
  }

  /// §5.5: control frames carry ≤ 125 bytes and are never fragmented.
  func controlViolation(_ header: FrameHeader) -> (UInt16, String)? {
    if !header.fin { return (CloseCode.protocolError, "fragmented control frame") }
    if header.payloadLength > UInt64(WebSocketFrame.maxControlPayload) {
      return (CloseCode.protocolError, "control frame too long")
    }
    return nil
  }

  /// §5.4 fragment ordering, then the message size limit (checked on the
  /// announced length, before any payload is read).
  func dataViolation(_ header: FrameHeader, _ opcode: Opcode) -> (UInt16, String)? {
    if opcode == .continuation && messageOpcode == nil {
      return (CloseCode.protocolError, "continuation without message")
    }
    if opcode != .continuation && messageOpcode != nil {
      return (CloseCode.protocolError, "message interrupted")
    }
    if header.payloadLength > UInt64(maxMessageBytes - message.count) {
      return (CloseCode.messageTooBig, "message too big")
    }
    return nil
  }
}
