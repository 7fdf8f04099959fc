import EventLoop
import RelayCluster
import RelayPrimitives

/// Where the cluster's Redis is: `redis://[:PASSWORD@]HOST:PORT[/DB]` (contract §12).
public struct RedisAddress: Sendable, Equatable {
  public var host: String
  public var port: Int
  public var password: String?
  public var db: Int

  /// `[[USER]:PASSWORD@]` at the start of a URL's authority: removes it from `rest`
  /// and returns the password (nil if none or empty). Redis 6 ACL users are not
  /// supported; a user name before the colon is ignored.
  static func takePassword(_ rest: inout Substring) -> String? {
    guard let at = rest.lastIndex(of: "@") else { return nil }
    var credentials = rest[..<at]
    if let colon = credentials.firstIndex(of: ":") { credentials = credentials[credentials.index(after: colon)...] }
    rest = rest[rest.index(after: at)...]
    return credentials.isEmpty ? nil : String(credentials)
  }

  /// Nil for anything that is not such a URL. `localhost` becomes 127.0.0.1: the
  /// connector takes IP literals.
  public init?(url: String) {
    guard url.hasPrefix("redis://") else { return nil }
    var rest = Substring(url.dropFirst("redis://".count))
    password = Self.takePassword(&rest)
    db = 0
    if let slash = rest.firstIndex(of: "/") {
      let tail = rest[rest.index(after: slash)...]
      if !tail.isEmpty {
        guard let n = Int(tail), n >= 0 else { return nil }
        db = n
      }
      rest = rest[..<slash]
    }
    var hostPart = rest
    port = 6379
    if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
      guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
      hostPart = rest[..<colon]
    }
    if hostPart.hasPrefix("["), hostPart.hasSuffix("]") { hostPart = hostPart.dropFirst().dropLast() }
    guard !hostPart.isEmpty else { return nil }
    host = hostPart == "localhost" ? "127.0.0.1" : String(hostPart)
  }
}

/// One connection to Redis on the server's loop: commands are pipelined, replies
/// matched in order (RESP2 has no ids). A reply that does not come within its time
/// limit, or any I/O or protocol error, ends the connection: every pending callback
/// then gets nil, and the owner reconnects.
final class RedisConnection {
  private let loop: Loop
  private var tcp: TCPConnection?
  private var parser = RESPParser()
  private var pending = FIFOQueue<(sentMs: UInt64, limitMs: UInt64, reply: (RESPValue?) -> Void)>()
  private var ended = false
  /// Runs once when the connection ends for any reason after it was established.
  var onEnd: (() -> Void)?
  /// Set on a subscribed connection (a sentinel's `+switch-master`): gets the values
  /// no command is waiting for. Without it such a value ends the connection.
  var onPush: ((RESPValue) -> Void)?

  private init(loop: Loop) { self.loop = loop }

  /// Connects, authenticates and selects the database; `completion` gets the ready
  /// connection or nil.
  static func open(loop: Loop, address: RedisAddress, completion: @escaping (RedisConnection?) -> Void) {
    let redis = RedisConnection(loop: loop)
    TCPConnector.connect(loop: loop, host: address.host, port: address.port) { result in
      guard case .success(let tcp) = result else { return completion(nil) }
      redis.attach(tcp)
      var setup: [[String]] = []
      if let password = address.password { setup.append(["AUTH", password]) }
      if address.db != 0 { setup.append(["SELECT", String(address.db)]) }
      guard !setup.isEmpty else { return completion(redis) }
      var left = setup.count
      var failed = false
      for command in setup {
        redis.send(command.map { Array($0.utf8) }, limitMs: 2_000) { reply in
          left -= 1
          if case .error = reply { failed = true }
          if reply == nil { failed = true }
          if left == 0 {
            if failed { redis.close() }
            completion(failed ? nil : redis)
          }
        }
      }
    }
  }

  private func attach(_ tcp: TCPConnection) {
    self.tcp = tcp
    tcp.onRead = { [weak self] bytes in self?.didRead(bytes) }
    tcp.onClose = { [weak self] _ in self?.end() }
    tcp.startReading()
  }

  var isOpen: Bool { !ended && tcp != nil }

  /// Sends one command; `reply` gets its reply, or nil if the connection ends first.
  /// `limitMs`: how long the reply may take (a blocking read's block time plus slack).
  func send(_ args: [[UInt8]], limitMs: UInt64 = 2_000, _ reply: @escaping (RESPValue?) -> Void) {
    guard let tcp, !ended else { return reply(nil) }
    pending.append((loop.nowMs, limitMs, reply))
    if !tcp.write(RESP.command(args)) { close() }
  }

  /// Ends the connection if the oldest reply is overdue; called from the owner's timer.
  /// When the oldest reply still awaited was asked for (loop ms), if any.
  var oldestPendingSentMs: UInt64? { pending.first?.sentMs }

  func checkOverdue() {
    guard let oldest = pending.first else { return }
    if loop.nowMs > oldest.sentMs + oldest.limitMs { close() }
  }

  func close() {
    tcp?.close()
    end()
  }

  private func didRead(_ bytes: UnsafeRawBufferPointer) {
    parser.feed(bytes)
    do {
      while let value = try parser.next() {
        guard let reply = pending.popFirst()?.reply else {
          guard let onPush else { return close() }  // a reply nobody asked for
          onPush(value)
          if ended { return }
          continue
        }
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
    for p in waiting { p.reply(nil) }
    onEnd?()
    onEnd = nil
  }
}
