import CLibUV

/// A listening TCP socket (`uv_tcp_t` + `uv_listen`). Accepted sockets get
/// `TCP_NODELAY`: the cork already coalesces writes per turn, so Nagle would only add
/// latency. The handle holds a +1 on the listener until its close callback.
public final class TCPListener: HandleOwner {
  private let loop: Loop
  private let tcp: UnsafeMutablePointer<uv_tcp_t>
  private var onConnection: ((TCPConnection) -> Void)?
  private var isClosing = false
  private var isClosed = false
  /// The bound port (the ephemeral port chosen by the kernel when bound to port 0).
  public let port: Int
  /// `SO_SNDBUF` of every accepted socket, in bytes (0: the kernel's default, which
  /// Linux autotunes up to `tcp_wmem`'s maximum, megabytes). Bytes in the kernel's
  /// send buffer are out of the relay's reach: a control frame (ping, close) queued
  /// now waits behind all of them, and none of them counts against
  /// `maxOutboundBytes`. Linux doubles the value for its bookkeeping (socket(7)).
  public var sendBufferBytes = 0

  /// Binds to `host` (an IPv4 or IPv6 literal) and `port` (0 for an ephemeral port).
  /// On failure the handle is closed again (its memory is freed once the loop runs).
  public init(loop: Loop, host: String, port: Int) throws(LoopError) {
    self.loop = loop
    let tcp = UnsafeMutablePointer<uv_tcp_t>.allocate(capacity: 1)
    self.tcp = tcp
    preconditionLibUVSucceeded(uv_tcp_init(loop.rawLoop, tcp), "uv_tcp_init")
    do throws(LoopError) {
      let address = try makeSocketAddress(host: host, port: port)
      let result = withSocketAddressPointer(address) { uv_tcp_bind(tcp, $0, 0) }
      guard result == 0 else { throw LoopError(code: result) }
      // libuv defers bind(2) failures such as EADDRINUSE to uv_listen (the stream's
      // delayed error); surface them here, where the address is known.
      guard tcp.pointee.delayed_error == 0 else { throw LoopError(code: tcp.pointee.delayed_error) }
      guard let bound = socketAddress(of: tcp, peer: false), let (_, boundPort) = describeSocketAddress(bound)
      else { throw LoopError.invalidArgument }
      self.port = boundPort
    } catch {
      // Not yet owned by self: close with a callback that only frees the memory.
      uv_close(tcp.cast(), freeUnownedTCPHandle)
      throw error
    }
    tcp.pointee.data = Unmanaged.passRetained(self).toOpaque()
  }

  deinit {
    precondition(isClosed, "TCPListener released before its close callback")
  }

  /// Starts accepting; `onConnection` receives each accepted connection, not yet
  /// reading (call `startReading()` after installing `onRead` / `onClose`).
  public func listen(backlog: Int32 = 1024, onConnection: @escaping (TCPConnection) -> Void) throws(LoopError) {
    precondition(!isClosing, "listen() on a closed TCPListener")
    self.onConnection = onConnection
    let result = uv_listen(tcp.cast(), backlog, connectionCallback)
    guard result == 0 else { throw LoopError(code: result) }
  }

  /// Stops listening and closes the handle. Idempotent.
  public func close() {
    guard !isClosing else { return }
    isClosing = true
    uv_close(tcp.cast(), handleCloseCallback)
  }

  func handleDidClose() {
    isClosing = true
    isClosed = true
    onConnection = nil
    tcp.deallocate()
  }

  /// Accepts one pending connection. Accept failures (the peer already gone) are
  /// dropped: there is nobody to report them to.
  fileprivate func acceptConnection(status: Int32) {
    guard status == 0, !isClosing, let onConnection else { return }
    let connection = TCPConnection(loop: loop)
    guard uv_accept(tcp.cast(), connection.stream) == 0 else { return connection.close() }
    _ = uv_tcp_nodelay(connection.tcp, 1)
    if sendBufferBytes > 0 { connection.setSendBufferSize(sendBufferBytes) }
    onConnection(connection)
  }
}

@available(*, unavailable)
extension TCPListener: Sendable {}

/// `uv_connection_cb`.
private func connectionCallback(_ server: UnsafeMutablePointer<uv_stream_t>?, _ status: Int32) {
  guard let server else { return }
  unretainedOwner(server.pointee.data, as: TCPListener.self).acceptConnection(status: status)
}

/// Close callback for a handle that never got an owner (failed bind).
private func freeUnownedTCPHandle(_ handle: UnsafeMutablePointer<uv_handle_t>?) {
  handle?.cast(to: uv_tcp_t.self).deallocate()
}

/// Opens outgoing TCP connections (load-test bots, the webhook client).
public enum TCPConnector {
  /// Connects to `host` (an IPv4 or IPv6 literal) and `port`. `completion` runs once:
  /// with the connection (`TCP_NODELAY` set, not yet reading), or with the error after
  /// the half-made handle was closed. An invalid address fails synchronously, inside
  /// this call; connection errors arrive from the loop. `source`, an IP literal of
  /// this host, is the local address to leave from (the port is still the kernel's).
  public static func connect(
    loop: Loop, host: String, port: Int, source: String? = nil,
    completion: @escaping (Result<TCPConnection, LoopError>) -> Void
  ) {
    let address: sockaddr_storage
    do { address = try makeSocketAddress(host: host, port: port) } catch { return completion(.failure(error)) }
    let connection = TCPConnection(loop: loop)
    if let source {
      do { try bindSource(connection.tcp, host: source) } catch {
        connection.close()
        return completion(.failure(error))
      }
    }
    let request = UnsafeMutablePointer<uv_connect_t>.allocate(capacity: 1)
    // Unretained: libuv's +1 on the handle outlives this request (cancelled first on close).
    request.pointee.data = Unmanaged.passUnretained(connection).toOpaque()
    connection.connectCompletion = completion
    let result = withSocketAddressPointer(address) { uv_tcp_connect(request, connection.tcp, $0, connectCallback) }
    guard result == 0 else {
      request.deallocate()
      connection.connectCompletion = nil
      connection.close()
      return completion(.failure(LoopError(code: result)))
    }
  }
}

/// `uv_connect_cb`: frees the request, then completes.
private func connectCallback(_ request: UnsafeMutablePointer<uv_connect_t>?, _ status: Int32) {
  guard let request else { return }
  let connection = unretainedOwner(request.pointee.data, as: TCPConnection.self)
  request.deallocate()
  connection.connectDidComplete(status: status)
}

extension TCPConnection {
  fileprivate func connectDidComplete(status: Int32) {
    guard let completion = connectCompletion else { return }
    connectCompletion = nil
    guard status == 0 else {
      close()
      return completion(.failure(LoopError(code: status)))
    }
    _ = uv_tcp_nodelay(tcp, 1)
    completion(.success(self))
  }
}
