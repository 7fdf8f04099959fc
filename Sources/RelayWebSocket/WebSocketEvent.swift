// What the connection state machine tells its shell.

/// Which end of the connection we are; decides masking (RFC 6455 §5.1, §5.3).
public enum WebSocketRole: Sendable {
  /// Receives masked frames, sends unmasked ones.
  case server
  /// Receives unmasked frames, sends masked ones.
  case client
}

/// Output of `WebSocketConnection.receive`, delivered in order.
public enum WebSocketEvent: Sendable, Equatable {
  /// A complete, UTF-8-validated text message (reassembled from fragments).
  case text([UInt8])
  /// A complete binary message (reassembled from fragments).
  case binary([UInt8])
  /// A ping arrived; the pong reply has already been emitted as `.write`
  /// (unless we are closing, when no more frames are sent).
  case ping([UInt8])
  /// A pong arrived (solicited or not, §5.5.3).
  case pong([UInt8])
  /// Bytes the protocol wants sent now: pong replies, close replies,
  /// close frames of a failed connection.
  case write([UInt8])
  /// The closing handshake completed or the connection failed. After
  /// flushing earlier `.write`s the shell closes TCP (§7.1.1: the server
  /// closes first). `code` is the peer's code (1005 when its close had no
  /// payload) or, on failure, the code we sent. `initiatedByPeer` is true
  /// when the peer started the closing handshake.
  case closed(code: UInt16, reason: String, initiatedByPeer: Bool)
}
