public import EventLoop
public import RelayCrypto
public import RelayCluster
import RelayClusterDriver
import RelayPrimitives

/// One connection to Redis on the server's loop: commands are pipelined, replies
/// matched in order (RESP2 has no ids). A reply that does not come within its time
/// limit, or any I/O or protocol error, ends the connection: every pending callback
/// then gets nil, and the owner reconnects.
public final class RedisConnection {
  private let loop: Loop
  private var tcp: TCPConnection?
  private var parser = RESPParser()
  private var pending = FIFOQueue<(RESPValue?) -> Void>()
  /// Each request's time limit, counted from Redis's last answer (the liveness rule).
  private var deadlines = ReplyDeadlines()
  private var ended = false
  /// Why the connection ended, when it is known (a TLS failure).
  public private(set) var endReason: String?
  /// Runs once when the connection ends for any reason after it was established.
  public var onEnd: (() -> Void)?
  /// Set on a subscribed connection (a sentinel's `+switch-master`): gets the values
  /// no command is waiting for. Without it such a value ends the connection.
  public var onPush: ((RESPValue) -> Void)?

  private init(loop: Loop) { self.loop = loop }

  /// Connects (through TLS for `rediss://`, verified with `tls`), authenticates and
  /// selects the database; `completion` gets the ready connection or nil, after
  /// `failed` got the reason (refused, TLS, `WRONGPASS`…) for the operator's log.
  public static func open(
    loop: Loop, address: RedisAddress, tls: TLSContext?, failed: ((String) -> Void)? = nil,
    completion: @escaping (RedisConnection?) -> Void
  ) {
    let redis = RedisConnection(loop: loop)
    TCPConnector.connect(loop: loop, host: address.host, port: address.port) { result in
      guard case .success(let tcp) = result else {
        failed?("connect: \(result)")
        return completion(nil)
      }
      if address.tls {
        guard let tls else {
          tcp.close()
          failed?("rediss:// without a TLS context")
          return completion(nil)
        }
        redis.attach(tcp, tls: TLSConnection(context: tls, serverName: address.serverName, isServer: false))
      } else {
        redis.attach(tcp, tls: nil)
      }
      let setup = address.setupCommands
      guard !setup.isEmpty else { return completion(redis) }
      var left = setup.count
      var problem: String?
      for command in setup {
        redis.send(command.map { Array($0.utf8) }, limitMs: 2_000) { reply in
          left -= 1
          if case .error(let message)? = reply, problem == nil { problem = "\(command[0]): \(message)" }
          if reply == nil, problem == nil { problem = redis.endReason ?? "connection ended" }
          if left == 0 {
            if let problem {
              redis.close()
              failed?(problem)
            }
            completion(problem == nil ? redis : nil)
          }
        }
      }
    }
  }

  /// With TLS, what the socket reads goes through the TLS connection first and what
  /// is written is sealed at flush time (`TCPConnection.sealer`); the commands sent
  /// before the handshake ends wait inside it. A TLS failure ends the connection.
  private func attach(_ tcp: TCPConnection, tls: TLSConnection?) {
    self.tcp = tcp
    if let tls {
      tcp.sealer = tls
      tcp.onRead = { [weak self] bytes in
        guard let self else { return }
        tls.receive(bytes) { self.didRead($0) }
        if case .failed(let error) = tls.state {
          self.endReason = "TLS: \(error)"
          return self.close()
        }
        if tls.state == .closed { return self.close() }
        if tls.hasOutput { self.tcp?.flushSoon() }
      }
      tcp.flushSoon()  // the ClientHello
    } else {
      tcp.onRead = { [weak self] bytes in self?.didRead(bytes) }
    }
    tcp.onClose = { [weak self] _ in self?.end() }
    tcp.startReading()
  }

  public var isOpen: Bool { !ended && tcp != nil }

  /// Sends one command; `reply` gets its reply, or nil if the connection ends first.
  /// `limitMs`: how long the reply may take (a blocking read's block time plus slack).
  public func send(_ args: [[UInt8]], limitMs: UInt64 = 2_000, _ reply: @escaping (RESPValue?) -> Void) {
    guard let tcp, !ended else { return reply(nil) }
    pending.append(reply)
    deadlines.sent(nowMs: loop.nowMs, limitMs: limitMs)
    if !tcp.write(RESP.command(args)) { close() }
  }

  /// Sends the command `before + [payload] + after`, the payload queued by reference
  /// (`OutboundBuffer(sharing:)`), not copied: a snapshot's upload piece.
  public func send(
    _ before: [[UInt8]], payload: [UInt8], after: [[UInt8]], limitMs: UInt64 = 2_000,
    _ reply: @escaping (RESPValue?) -> Void
  ) {
    guard let tcp, !ended else { return reply(nil) }
    pending.append(reply)
    deadlines.sent(nowMs: loop.nowMs, limitMs: limitMs)
    let command = RESP.command(before, payloadCount: payload.count, after: after)
    guard tcp.write(command.head), payload.isEmpty || tcp.write(OutboundBuffer(sharing: payload)), tcp.write(command.tail)
    else { return close() }
  }

  /// Not silent for the stall limit as the owner's last check found
  /// (`checkOverdue(stallMs:)`); any reply makes it responsive again.
  public var responsive: Bool { !deadlines.stalled }

  /// Ends the connection once Redis has said nothing for the oldest request's limit,
  /// and notes a silence of `stallMs` (`responsive`); called from the owner's timer
  /// (ReplyDeadlines.swift says why silence counts only up to the previous call).
  public func checkOverdue(stallMs: UInt64) {
    if deadlines.check(nowMs: loop.nowMs, stallMs: stallMs) { close() }
  }

  public func close() {
    tcp?.close()
    end()
  }

  private func didRead(_ bytes: UnsafeRawBufferPointer) {
    parser.feed(bytes)
    do {
      while let value = try parser.next() {
        guard let reply = pending.popFirst() else {
          guard let onPush else { return close() }  // a reply nobody asked for
          onPush(value)
          if ended { return }
          continue
        }
        deadlines.answered(nowMs: loop.nowMs)
        reply(value)
        if ended { return }
      }
    } catch {
      close()
    }
  }

  private func end() {
    guard !ended else { return }
    ended = true
    tcp = nil
    let waiting = pending.elements
    pending = FIFOQueue()
    deadlines = ReplyDeadlines()
    for reply in waiting { reply(nil) }
    onEnd?()
    onEnd = nil
  }
}
