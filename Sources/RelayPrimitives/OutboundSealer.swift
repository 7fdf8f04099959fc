/// Transforms a connection's outbound bytes at flush time: TLS encrypts everything
/// queued during a loop turn as one batch (one `SSL_write` run, one socket write),
/// so TLS keeps the cork. The socket (EventLoop) calls it and RelayCrypto's TLS
/// implements it; it lives here so that neither of those I/O modules has to import
/// the other.
public protocol OutboundSealer: AnyObject {
  /// Plaintext to encrypt, in order; valid only during the call. False when it
  /// cannot be sealed (the connection failed; `takeSealed` then says so).
  @discardableResult
  func seal(_ plaintext: UnsafeRawBufferPointer) -> Bool
  /// A clean close begins: queue the protocol's close message (TLS close_notify).
  func closing()
  /// Everything to send now (ciphertext, including what the protocol produced on
  /// its own, e.g. handshake messages); nil when the connection failed and must close.
  func takeSealed() -> [UInt8]?
}
