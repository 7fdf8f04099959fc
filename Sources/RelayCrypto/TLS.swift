import COpenSSL
import CRelayShims

public import RelayPrimitives

// TLS for the relay's listener (protocol/ §1, `--tls-cert` / `--tls-key`), driven
// through memory BIOs: OpenSSL never touches a socket. The shell feeds it the bytes
// it read and writes what it produces, so TLS fits the loop's reads and corked
// writes like any other codec (DESIGN.md, "Layers": RelayCrypto is the only Swift
// that touches OpenSSL).
//
// Error discipline (OpenSSL's `ERR_*` queue is per thread and sticky): the queue is
// cleared before every call that can fail and read after every failing one, so a
// failure is never blamed on the wrong connection.

/// Why a TLS context or connection failed; `label` is short and stable (metrics).
public struct TLSError: Error, Equatable, CustomStringConvertible {
  public let label: String
  public let detail: String
  public var description: String { detail.isEmpty ? label : "\(label): \(detail)" }

  init(_ label: String, _ detail: String = TLSError.drainQueue()) {
    self.label = label
    self.detail = detail
  }

  /// Empties OpenSSL's error queue into one line.
  static func drainQueue() -> String {
    var parts: [String] = []
    while true {
      let code = ERR_get_error()
      if code == 0 { break }
      var text = [CChar](repeating: 0, count: 256)
      ERR_error_string_n(code, &text, text.count)
      parts.append(String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
    }
    return parts.joined(separator: "; ")
  }
}

/// A configured `SSL_CTX`: TLS 1.2 and 1.3 only, no renegotiation, no compression,
/// forward-secret AEAD suites, released idle buffers, ALPN `http/1.1`.
public final class TLSContext: @unchecked Sendable {
  let ctx: OpaquePointer

  /// A server context from PEM files: `certificateChain` may hold the leaf followed
  /// by intermediates; the key may be ECDSA or RSA and must match the leaf.
  public init(certificateChain: String, privateKey: String) throws(TLSError) {
    ERR_clear_error()
    guard let ctx = SSL_CTX_new(TLS_server_method()) else { throw TLSError("context") }
    self.ctx = ctx
    guard relay_tls_ctx_harden(ctx, 1) == 1 else { throw TLSError("context") }
    guard SSL_CTX_use_certificate_chain_file(ctx, certificateChain) == 1 else { throw TLSError("certificate") }
    guard SSL_CTX_use_PrivateKey_file(ctx, privateKey, SSL_FILETYPE_PEM) == 1 else { throw TLSError("private_key") }
    guard SSL_CTX_check_private_key(ctx) == 1 else { throw TLSError("key_mismatch") }
  }

  /// A client context (relay-bots, Redis over TLS, tests): verifies the server
  /// against `caFile` (the system's store when nil) unless `verify` is false. With
  /// `alsoSystemRoots`, `caFile` adds roots to the system's instead of replacing
  /// them (contract §9a `--tls-ca-file`).
  public init(clientWithCA caFile: String?, alsoSystemRoots: Bool = false, verify: Bool = true) throws(TLSError) {
    ERR_clear_error()
    guard let ctx = SSL_CTX_new(TLS_client_method()) else { throw TLSError("context") }
    self.ctx = ctx
    guard relay_tls_ctx_harden(ctx, 0) == 1 else { throw TLSError("context") }
    if verify {
      if caFile == nil || alsoSystemRoots {
        guard SSL_CTX_set_default_verify_paths(ctx) == 1 else { throw TLSError("ca") }
      }
      if let caFile { guard SSL_CTX_load_verify_locations(ctx, caFile, nil) == 1 else { throw TLSError("ca") } }
      SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, nil)
    } else {
      SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, nil)
    }
  }

  deinit { SSL_CTX_free(ctx) }
}

/// One TLS connection over memory BIOs. Not thread-safe: one loop owns it.
///
/// Use: `receive` what the socket read (plaintext comes out through the closure),
/// `seal` plaintext to send, and after either, write `takeOutput()` to the socket.
public final class TLSConnection {
  public enum State: Equatable {
    case handshaking
    case established
    /// The peer sent `close_notify`.
    case closed
    /// A fatal error: write `takeOutput()` (an alert, if any) and close the socket;
    /// no `close_notify` after this (RFC 8446 §6.2).
    case failed(TLSError)
  }

  private let ssl: OpaquePointer
  /// The bytes between OpenSSL and the socket (relay_tls.h): no buffer is held
  /// while the connection is idle.
  private let io: UnsafeMutablePointer<relay_tls_io>
  public private(set) var state = State.handshaking
  /// Free for the owner: e.g. whether this handshake's outcome was counted.
  public var reported = false
  /// Bytes received before the handshake finished, to tell plain HTTP from TLS.
  private var firstBytes: [UInt8] = []
  /// Plaintext sealed before the handshake finished (a client's HTTP request),
  /// encrypted as soon as it does.
  private var early: [UInt8] = []

  /// `serverName`: for a client, the name sent as SNI and verified against the
  /// certificate; nil for a server.
  public init(context: TLSContext, serverName: String? = nil, isServer: Bool = true) {
    ERR_clear_error()
    io = .allocate(capacity: 1)
    io.initialize(to: relay_tls_io(in: nil, in_len: 0, out: nil, out_len: 0, out_cap: 0))
    guard let ssl = SSL_new(context.ctx), let bio = relay_tls_bio_new(io) else {
      preconditionFailure("OpenSSL out of memory creating a TLS connection")
    }
    self.ssl = ssl
    SSL_set_bio(ssl, bio, bio)  // the SSL owns the BIO from here (one reference for both ends)
    if isServer {
      SSL_set_accept_state(ssl)
    } else {
      SSL_set_connect_state(ssl)
      if let serverName {
        if serverName.contains(":") || serverName.allSatisfy({ $0.isNumber || $0 == "." }) {
          // An IP literal: verified against the certificate's IP names; no SNI (RFC 6066 §3).
          _ = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
        } else {
          _ = relay_tls_set_sni(ssl, serverName)
          _ = SSL_set1_host(ssl, serverName)
        }
      }
      _ = relay_tls_offer_http11(ssl)
      drive()  // ClientHello
    }
  }

  deinit {
    SSL_free(ssl)
    relay_tls_io_take(io)
    io.deallocate()
  }

  /// The ALPN protocol agreed, if any.
  public var alpn: String? {
    var buffer = [CChar](repeating: 0, count: 32)
    let n = relay_tls_alpn_selected(ssl, &buffer, buffer.count)
    return n == 0 ? nil : String(decoding: buffer.prefix(n).map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }

  /// The negotiated protocol version (`TLSv1.2`, `TLSv1.3`).
  public var version: String { String(cString: SSL_get_version(ssl)) }

  /// Feeds bytes read from the socket; `plaintext` gets the application data they
  /// complete (possibly in several pieces, valid only during the call).
  public func receive(_ bytes: UnsafeRawBufferPointer, plaintext: (UnsafeRawBufferPointer) -> Void) {
    guard state == .handshaking || state == .established, bytes.count > 0 else { return }
    if state == .handshaking, firstBytes.count < 8 { firstBytes.append(contentsOf: bytes.prefix(8 - firstBytes.count)) }
    // Lent to the BIO for this call only: OpenSSL reads until it wants more, so
    // everything is consumed (or the connection failed) before it returns.
    io.pointee.in = bytes.baseAddress?.assumingMemoryBound(to: UInt8.self)
    io.pointee.in_len = bytes.count
    defer {
      io.pointee.in = nil
      io.pointee.in_len = 0
    }
    drive()
    readPlaintext(plaintext)
  }

  /// Encrypts `plaintext` (one batch: consecutive `seal` calls between two
  /// `takeOutput` calls still make one socket write). False after a failure or close.
  @discardableResult
  public func seal(_ plaintext: UnsafeRawBufferPointer) -> Bool {
    if state == .handshaking {
      early.append(contentsOf: plaintext)
      return true
    }
    guard state == .established else { return false }
    guard plaintext.count > 0 else { return true }
    ERR_clear_error()
    var written = 0
    let ok = SSL_write_ex(ssl, plaintext.baseAddress, plaintext.count, &written)
    guard ok == 1, written == plaintext.count else {
      fail(TLSError("write"))
      return false
    }
    return true
  }

  /// Queues `close_notify` (clean close); not after a failure.
  public func close() {
    guard state == .established || state == .closed else { return }
    ERR_clear_error()
    _ = SSL_shutdown(ssl)
    ERR_clear_error()
  }

  /// Bytes OpenSSL produced for the socket since the last call.
  public func takeOutput() -> [UInt8] {
    guard io.pointee.out_len > 0, let out = io.pointee.out else { return [] }
    let bytes = Array(UnsafeBufferPointer(start: out, count: io.pointee.out_len))
    relay_tls_io_take(io)
    return bytes
  }

  public var hasOutput: Bool { io.pointee.out_len > 0 }

  private func drive() {
    guard state == .handshaking else { return }
    ERR_clear_error()
    let r = SSL_do_handshake(ssl)
    if r == 1 {
      state = .established
      firstBytes = []
      if !early.isEmpty {
        let pending = early
        early = []
        pending.withUnsafeBytes { _ = seal($0) }
      }
      return
    }
    let e = SSL_get_error(ssl, r)
    if e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE { return }
    fail(classify())
  }

  private func readPlaintext(_ plaintext: (UnsafeRawBufferPointer) -> Void) {
    guard state == .established else { return }
    withUnsafeTemporaryAllocation(byteCount: 16_384, alignment: 1) { buffer in
      while true {
        ERR_clear_error()
        var n = 0
        let ok = SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &n)
        if ok == 1 {
          plaintext(UnsafeRawBufferPointer(rebasing: buffer[..<n]))
          continue
        }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ, SSL_ERROR_WANT_WRITE:
          return
        case SSL_ERROR_ZERO_RETURN:
          state = .closed
          return
        default:
          return fail(TLSError("read"))
        }
      }
    }
  }

  /// A handshake failure's label: plain HTTP sent to the TLS port, an old or
  /// unsupported protocol version, or any other handshake failure.
  private func classify() -> TLSError {
    let detail = TLSError.drainQueue()
    let methods = ["GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN"]
    if firstBytes.count >= 4, methods.contains(String(decoding: firstBytes.prefix(4), as: UTF8.self)) {
      return TLSError("plain_http", detail)
    }
    if detail.contains("version") || detail.contains("protocol") { return TLSError("protocol_version", detail) }
    return TLSError("handshake", detail)
  }

  private func fail(_ error: TLSError) {
    if case .failed = state { return }
    state = .failed(error)
  }
}

/// A TLS connection is its socket's sealer: everything written to the socket in
/// one loop turn is encrypted as one batch at flush time (TCPConnection+Write.swift),
/// and a graceful shutdown sends close_notify after it.
extension TLSConnection: OutboundSealer {
  public func closing() { close() }
  public func takeSealed() -> [UInt8]? { takeOutput() }
}
