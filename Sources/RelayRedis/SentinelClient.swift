public import EventLoop
public import Logging
public import RelayCrypto
import RelayCluster

/// A cluster node's view of Redis Sentinel (docs/cluster.md, "Redis high
/// availability"): it asks the sentinels, in the order of the URL, which address is
/// the primary (`SENTINEL get-master-addr-by-name`), and keeps one subscription to
/// `+switch-master` open on the first sentinel that answers, so a failover is
/// followed as soon as the sentinels announce it rather than at the next failed
/// reconnect. Nothing here decides what a reply means for the log: the node does.
public final class SentinelClient {
  private let loop: Loop
  public let address: SentinelAddress
  private let logger: Logger
  /// `rediss+sentinel://`: the sentinels speak TLS too.
  private let tls: TLSContext?
  private var watch: RedisConnection?
  private var watchTimer: EventLoop.Timer?
  private var watchIndex = 0
  private var stopped = false
  /// Runs with the new primary each time a sentinel announces `+switch-master` for
  /// this master name.
  public var onSwitch: ((RedisAddress) -> Void)?

  /// How long one sentinel may take to connect and answer before the next is asked.
  static let askLimitMs: UInt64 = 1_000
  /// Delay before the subscription is opened again after it ended.
  static let rewatchMs: UInt64 = 500

  public init(loop: Loop, address: SentinelAddress, tls: TLSContext?, logger: Logger) {
    self.loop = loop
    self.address = address
    self.tls = tls
    self.logger = logger
  }

  // MARK: Asking for the primary

  /// The primary's address as the first sentinel that knows the master name says,
  /// or nil when none does.
  public func locate(_ completion: @escaping (RedisAddress?) -> Void) {
    ask(0, completion)
  }

  private func ask(_ index: Int, _ completion: @escaping (RedisAddress?) -> Void) {
    guard index < address.sentinels.count, !stopped else { return completion(nil) }
    let command = ["SENTINEL", "get-master-addr-by-name", address.masterName].map { Array($0.utf8) }
    request(index, command) { [weak self] reply in
      guard let self else { return }
      guard case .array(let items?)? = reply,
        let found = SentinelAddress.primaryAddress(fromReply: items.map(\.string))
      else {
        return self.ask(index + 1, completion)
      }
      completion(self.address.primary(host: found.host, port: found.port))
    }
  }

  /// One command on a fresh connection to sentinel `index`, closed afterwards; nil
  /// when it cannot be reached or does not answer within `askLimitMs`.
  private func request(_ index: Int, _ command: [[UInt8]], _ done: @escaping (RESPValue?) -> Void) {
    let timer = EventLoop.Timer(loop: loop)
    var finished = false
    var connection: RedisConnection?
    let finish: (RESPValue?) -> Void = { reply in
      guard !finished else { return }
      finished = true
      timer.close()
      connection?.close()
      done(reply)
    }
    timer.start(afterMs: Self.askLimitMs) { finish(nil) }
    open(index) { redis in
      guard let redis else { return finish(nil) }
      guard !finished else { return redis.close() }
      connection = redis
      redis.send(command, limitMs: Self.askLimitMs) { finish($0) }
    }
  }

  /// Connects to sentinel `index` (its host looked up off the loop when it is a name).
  private func open(_ index: Int, _ completion: @escaping (RedisConnection?) -> Void) {
    var target = address.sentinel(index)
    HostResolver.resolve(target.host, on: loop) { [loop, tls] ip in
      guard case .success(let ip) = ip else { return completion(nil) }
      target.host = ip
      RedisConnection.open(loop: loop, address: target, tls: tls, completion: completion)
    }
  }

  // MARK: Following failovers

  /// Subscribes to `+switch-master` on the first sentinel that accepts, and again
  /// (on the next sentinel) whenever that connection ends.
  public func startWatching() {
    guard !stopped, watch == nil else { return }
    let index = watchIndex % address.sentinels.count
    watchIndex += 1
    open(index) { [weak self] redis in
      guard let self, !self.stopped, let redis else {
        redis?.close()
        self?.rewatch()
        return
      }
      self.watch = redis
      redis.onPush = { [weak self] value in self?.pushed(value) }
      redis.onEnd = { [weak self] in
        self?.watch = nil
        self?.rewatch()
      }
      redis.send([Array("SUBSCRIBE".utf8), Array("+switch-master".utf8)], limitMs: Self.askLimitMs) { _ in }
    }
  }

  private func rewatch() {
    guard !stopped else { return }
    if watchTimer == nil { watchTimer = EventLoop.Timer(loop: loop) }
    watchTimer?.start(afterMs: Self.rewatchMs) { [weak self] in self?.startWatching() }
  }

  /// `["message", "+switch-master", "<name> <old-ip> <old-port> <new-ip> <new-port>"]`.
  private func pushed(_ value: RESPValue) {
    guard case .array(let items?) = value, items.count == 3, items[0].string == "message",
      let text = items[2].string, let primary = address.switchedPrimary(message: text)
    else { return }
    logger.warning("Redis Sentinel switched the primary", metadata: ["primary": "\(primary.host):\(primary.port)"])
    onSwitch?(address.primary(host: primary.host, port: primary.port))
  }

  public func stop() {
    stopped = true
    watchTimer?.close()
    watchTimer = nil
    watch?.close()
    watch = nil
  }
}
