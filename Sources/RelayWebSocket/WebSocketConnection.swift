// The WebSocket connection state machine after the opening handshake
// (RFC 6455 §5 framing, §5.4 fragmentation, §5.5 control frames, §7 closing,
// §8.1 UTF-8). Sans-I/O: bytes in, events out; any split of the input gives
// the same events.
import RelayPrimitives

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
    case message  // a text/binary data frame: into `storage`
    case control  // ping/pong/close: into `control`
    case discard  // a data frame arriving while closing (§7.1.2 onward)
  }

  // Stored properties are ordered widest first so the struct packs tightly: it
  // lives inline in every server connection.

  /// Largest message accepted (sum of fragments); beyond it, close 1009.
  public var maxMessageBytes: Int { Int(messageLimit) }
  /// Masking keys for the client role (RFC 6455 §5.3 wants them unpredictable; the
  /// client transport seeds this from OpenSSL's RNG): seeded, so the pure layer stays
  /// deterministic for a given seed.
  var maskGenerator: SeededRandom

  // The frame whose payload is being read.
  var payloadRemaining = 0
  /// Payload bytes of this frame already consumed: the masking phase (§5.3).
  var payloadConsumed = 0

  // The data message being reassembled (§5.4). `storage` is scratch space
  // reused from message to message (no allocation per message once warm);
  // its first `messageLength` bytes are the message so far.
  var storage: [UInt8] = []
  var messageLength = 0
  var control: [UInt8] = []

  // A header split across receive() calls is assembled here.
  var pendingHeader = PartialHeader()
  /// `maxMessageBytes`, in 4 bytes: with the 4-byte mask it fills the space the
  /// header leaves before the one-byte fields.
  let messageLimit: UInt32
  /// The current frame's masking key; `.none` for an unmasked frame.
  var frameMask = MaskKey.none

  public internal(set) var state: State = .open
  public let role: WebSocketRole
  var inPayload = false
  var frameOpcode: Opcode = .continuation
  var frameFin = true
  var sink = PayloadSink.discard
  var messageOpcode: Opcode?
  var utf8 = UTF8Validator()

  /// `maskSeed` seeds the client-role masking keys; pass a random value
  /// from a CSPRNG in production (§10.3), anything in tests.
  public init(
    role: WebSocketRole, maxMessageBytes: Int = 65_536,
    maskSeed: UInt64 = 0x5DEE_CE66_D1CE_4E5B
  ) {
    precondition(maxMessageBytes >= 0 && maxMessageBytes <= UInt32.max, "maxMessageBytes must be within 0...4 GiB")
    self.role = role
    self.messageLimit = UInt32(maxMessageBytes)
    self.maskGenerator = SeededRandom(seed: maskSeed)
  }

  /// Storage above this size is released after its message is delivered,
  /// so one large message does not pin memory on an idle connection.
  public static let retainedStorageBytes = 16 * 1024

  /// Feeds inbound bytes. Events go to `emit` in order; complete data
  /// messages arrive as `.text` / `.binary` arrays. Handles any split of the
  /// input, down to one byte per call. Input after `.closed` is ignored.
  public mutating func receive(
    _ bytes: UnsafeRawBufferPointer, emit: (WebSocketEvent) -> Void
  ) {
    receive(
      bytes,
      onMessage: { opcode, payload in
        emit(opcode == .text ? .text(Array(payload)) : .binary(Array(payload)))
      }, emit: emit)
  }

  /// The allocation-free form of `receive(_:emit:)` (the server's hot path):
  /// each complete data message goes to `onMessage` as `.text` or `.binary`
  /// with bytes *borrowed* for the duration of the call (text already
  /// UTF-8-validated); every other event goes to `emit`, in the same order
  /// relative to messages as `receive(_:emit:)` would give.
  public mutating func receive(
    _ bytes: UnsafeRawBufferPointer,
    onMessage: (_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) -> Void,
    emit: (WebSocketEvent) -> Void
  ) {
    consume(bytes, writable: false, onMessage: onMessage, emit: emit)
  }

  /// `receive(_:onMessage:emit:)` for input the caller lets the codec overwrite
  /// (the server's loop-wide read buffer): a masked final frame lying wholly in
  /// the input is unmasked in place and handed over from there, so a peer whose
  /// messages each arrive in one read never makes the connection hold a message
  /// buffer between messages. The input's contents are unspecified afterwards.
  public mutating func receive(
    overwriting bytes: UnsafeMutableRawBufferPointer,
    onMessage: (_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) -> Void,
    emit: (WebSocketEvent) -> Void
  ) {
    consume(UnsafeRawBufferPointer(bytes), writable: true, onMessage: onMessage, emit: emit)
  }

  /// `receive(_:emit:)` with the in-place unmasking of `receive(overwriting:onMessage:emit:)`.
  public mutating func receive(
    overwriting bytes: UnsafeMutableRawBufferPointer, emit: (WebSocketEvent) -> Void
  ) {
    receive(
      overwriting: bytes,
      onMessage: { opcode, payload in
        emit(opcode == .text ? .text(Array(payload)) : .binary(Array(payload)))
      }, emit: emit)
  }

  mutating func consume(
    _ bytes: UnsafeRawBufferPointer, writable: Bool,
    onMessage: (_ opcode: Opcode, _ payload: UnsafeRawBufferPointer) -> Void,
    emit: (WebSocketEvent) -> Void
  ) {
    guard let base = bytes.baseAddress else { return }
    let count = bytes.count
    var offset = 0
    while offset < count && state != .closed {
      let available = count - offset
      if inPayload {
        offset += consumePayload(
          base + offset, available: available, writable: writable, onMessage: onMessage,
          emit: emit)
      } else {
        offset += consumeHeader(
          base + offset, available: available, onMessage: onMessage, emit: emit)
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
    // Data frames are discarded from now on; drop a half-built message,
    // including the rest of a data frame whose payload is mid-read.
    messageOpcode = nil
    messageLength = 0
    if inPayload && sink == .message { sink = .discard }
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
    role == .client ? UInt32(truncatingIfNeeded: maskGenerator.next() >> 32) : nil
  }
}

// MARK: - Headers

extension WebSocketConnection {
  /// Reads a frame header; returns the bytes consumed. Parses straight from
  /// the input when the whole header is there, else assembles it byte-wise.
  mutating func consumeHeader(
    _ bytes: UnsafeRawPointer, available: Int,
    onMessage: (Opcode, UnsafeRawBufferPointer) -> Void, emit: (WebSocketEvent) -> Void
  ) -> Int {
    if pendingHeader.isEmpty && available >= 2 {
      let size = FrameHeader.size(secondByte: bytes.load(fromByteOffset: 1, as: UInt8.self))
      if available >= size {
        beginFrame(FrameHeader(parsing: bytes), onMessage: onMessage, emit: emit)
        return size
      }
    }
    var used = 0
    while used < available {
      pendingHeader.append(bytes.load(fromByteOffset: used, as: UInt8.self))
      used += 1
      if pendingHeader.count <= 2, let (code, reason) = leadingBytesViolation() {
        // Fail on the first or second byte rather than after the header.
        fail(code: code, reason: reason, emit: emit)
        break
      }
      if pendingHeader.count >= 2
        && pendingHeader.count == FrameHeader.size(secondByte: pendingHeader[1])
      {
        let header = pendingHeader.withUnsafeBytes { FrameHeader(parsing: $0) }
        pendingHeader.removeAll()
        beginFrame(header, onMessage: onMessage, emit: emit)
        break
      }
    }
    return used
  }

  /// Applies the acceptance rules to a new header, then prepares to read
  /// its payload (or finishes it at once when empty).
  mutating func beginFrame(
    _ header: FrameHeader, onMessage: (Opcode, UnsafeRawBufferPointer) -> Void,
    emit: (WebSocketEvent) -> Void
  ) {
    if let (code, reason) = violation(header) {
      fail(code: code, reason: reason, emit: emit)
      return
    }
    let opcode = Opcode(rawValue: header.opcodeValue)!
    frameOpcode = opcode
    frameFin = header.fin
    frameMask = header.mask ?? .none
    // The header checks bound the length (≤ 125, ≤ maxMessageBytes, or a
    // discarded frame with the top bit clear); still, a wire length becomes
    // a size only through a checked conversion.
    guard let length = Int(exactly: header.payloadLength) else {
      fail(code: CloseCode.messageTooBig, reason: "message too big", emit: emit)
      return
    }
    payloadRemaining = length
    payloadConsumed = 0
    sink = chooseSink(opcode)
    if sink == .message && opcode != .continuation {
      messageOpcode = opcode
      utf8.reset()
    }
    if payloadRemaining == 0 {
      finishFrame(onMessage: onMessage, emit: emit)
    } else {
      inPayload = true
    }
  }

  func chooseSink(_ opcode: Opcode) -> PayloadSink {
    if opcode.isControl { return .control }
    return state == .open ? .message : .discard
  }

  /// Makes `storage` hold at least `needed` bytes, growing geometrically so
  /// many small fragments do not cost quadratic copying. Zero-filled once
  /// per growth; then written in place.
  mutating func ensureStorage(_ needed: Int) {
    guard needed > storage.count else { return }
    let target = Swift.max(needed, Swift.min(storage.count * 2, maxMessageBytes))
    storage.append(contentsOf: repeatElement(0, count: target - storage.count))
  }

  /// The first rule a header breaks, as (close code, reason), or nil.
  func violation(_ header: FrameHeader) -> (UInt16, String)? {
    if let found = byteZeroViolation(reservedBits: header.reservedBits, opcode: header.opcodeValue)
    {
      return found
    }
    if let found = maskViolation(masked: header.mask != nil) { return found }
    let opcode = Opcode(rawValue: header.opcodeValue)!
    // §5.2: the most significant bit of a 64-bit length must be 0.
    if header.payloadLength >> 63 != 0 { return (CloseCode.protocolError, "bad length") }
    if opcode.isControl { return controlViolation(header) }
    if state != .open { return nil }  // discarded while closing
    return dataViolation(header, opcode)
  }

  /// The same first checks as `violation`, in the same order, on the one
  /// or two header bytes assembled so far (so any split fails alike).
  func leadingBytesViolation() -> (UInt16, String)? {
    let byte0 = pendingHeader[0]
    if let found = byteZeroViolation(reservedBits: byte0 & 0x70, opcode: byte0 & 0x0F) {
      return found
    }
    guard pendingHeader.count == 2 else { return nil }
    return maskViolation(masked: pendingHeader[1] & 0x80 != 0)
  }

  /// §5.2: RSV bits must be 0 unless an extension defines them (we negotiate
  /// none); reserved opcodes fail the connection.
  func byteZeroViolation(reservedBits: UInt8, opcode: UInt8) -> (UInt16, String)? {
    if reservedBits != 0 { return (CloseCode.protocolError, "reserved bits set") }
    if Opcode(rawValue: opcode) == nil { return (CloseCode.protocolError, "reserved opcode") }
    return nil
  }

  /// §5.1: clients mask every frame, servers mask none.
  func maskViolation(masked: Bool) -> (UInt16, String)? {
    guard masked != (role == .server) else { return nil }
    return (CloseCode.protocolError, role == .server ? "unmasked frame" : "masked frame")
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
    if header.payloadLength > UInt64(maxMessageBytes - messageLength) {
      return (CloseCode.messageTooBig, "message too big")
    }
    return nil
  }
}

/// A frame header split across reads, assembled in a fixed inline buffer of the
/// largest header's 14 bytes (§5.2), so no connection holds a heap block for it.
struct PartialHeader {
  /// Exactly 14 bytes, so the length packs right behind them.
  private var storage: (UInt64, UInt32, UInt16) = (0, 0, 0)
  private var length: UInt8 = 0

  var count: Int { Int(length) }

  var isEmpty: Bool { count == 0 }

  subscript(index: Int) -> UInt8 {
    precondition(index >= 0 && index < count, "PartialHeader index out of range")
    return Swift.withUnsafeBytes(of: storage) { $0[index] }
  }

  mutating func append(_ byte: UInt8) {
    precondition(count < FrameHeader.maxSize, "frame header longer than 14 bytes")
    let index = count
    Swift.withUnsafeMutableBytes(of: &storage) { $0[index] = byte }
    length += 1
  }

  /// The assembled bytes, valid during `body`.
  func withUnsafeBytes<Result>(_ body: (UnsafeRawPointer) -> Result) -> Result {
    Swift.withUnsafeBytes(of: storage) { body($0.baseAddress!) }
  }

  mutating func removeAll() {
    length = 0
  }
}
