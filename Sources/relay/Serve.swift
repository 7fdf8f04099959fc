import ArgumentParser
import Logging
import RelayCore
import RelayServer

#if canImport(Glibc)
  import Glibc
#endif

/// `relay serve`: every flag of the contract, each also readable from `RELAY_*`.
/// All durations are milliseconds.
struct Serve: ParsableCommand {
  static let configuration = CommandConfiguration(abstract: "Run the relay server.")

  @Option(help: "HOST:PORT to listen on (IPv6 as [::1]:PORT).") var listen: String?
  @Flag(help: "Enable GET /v1/echo, a plain WebSocket echo for conformance suites.") var echo = false
  @Flag(inversion: .prefixedNo, help: "Serve the demo page at GET /demo (default: on in dev mode, off otherwise).")
  var demo: Bool?
  @Option(help: "HS256 secret for hello tokens; without one the relay runs in dev mode.") var secret: String?
  @Option(name: .customLong("admin-key"), help: "Bearer key of the admin API.") var adminKey: String?
  @Option(name: .customLong("max-message-bytes")) var maxMessageBytes: Int?
  @Option(name: .customLong("max-outbound-bytes")) var maxOutboundBytes: Int?
  @Option(name: .customLong("outbound-budget-bytes"), help: "bytes queued for all connections") var outboundBudgetBytes: Int?
  @Option(name: .customLong("socket-send-buffer-bytes"), help: "SO_SNDBUF per socket (0 = kernel default)") var socketSendBufferBytes: Int?
  @Option(name: .customLong("drain-timeout"), help: "ms") var drainTimeout: Int?
  @Option(name: .customLong("max-participants")) var maxParticipants: Int?
  @Option(name: .customLong("max-sessions-per-connection")) var maxSessionsPerConnection: Int?
  @Option(name: .customLong("max-bad-messages")) var maxBadMessages: Int?
  @Option(name: .customLong("message-rate"), help: "message.send per participant per 1000 ms") var messageRate: Int?
  @Option(name: .customLong("join-rate"), help: "session.join + session.leave per connection per 10000 ms") var joinRate: Int?
  @Option(name: .customLong("session-join-rate"), help: "joins + leaves of one session per 10000 ms, all connections (0 = no bound)") var sessionJoinRate: Int?
  @Option(name: .customLong("max-name-bytes"), help: "UTF-8 bytes of a user's name (hello.dev or token)") var maxNameBytes: Int?
  @Option(name: .customLong("max-avatar-bytes"), help: "UTF-8 bytes of a user's avatar (hello.dev or token)") var maxAvatarBytes: Int?
  @Option(name: .customLong("heartbeat-interval"), help: "ms") var heartbeatInterval: Int?
  @Option(name: .customLong("heartbeat-timeout"), help: "ms") var heartbeatTimeout: Int?
  @Option(help: "ms") var grace: Int?
  @Option(name: .customLong("background-grace"), help: "ms") var backgroundGrace: Int?
  @Option(name: .customLong("idle-timeout"), help: "ms") var idleTimeout: Int?
  @Option(name: .customLong("replay-events")) var replayEvents: Int?
  @Option(name: .customLong("replay-age"), help: "ms") var replayAge: Int?
  @Option(name: .customLong("replay-bytes"), help: "bytes of kept events per session") var replayBytes: Int?
  @Option(name: .customLong("replay-budget-bytes"), help: "bytes of kept events of all sessions") var replayBudgetBytes: Int?
  @Option(name: .customLong("max-ended-calls"), help: "finished calls kept for idempotent repeats") var maxEndedCalls: Int?
  @Option(name: .customLong("max-ended-call-bytes"), help: "bytes of finished calls kept") var maxEndedCallBytes: Int?
  @Option(name: .customLong("ring-timeout"), help: "ms") var ringTimeout: Int?
  @Option(name: .customLong("ring-rate"), help: "calls ringing one user per 60000 ms (0 = no bound)") var ringRate: Int?
  @Option(name: .customLong("max-push-devices"), help: "push devices registered per user; the least recently registered goes") var maxPushDevices: Int?
  @Option(name: .customLong("hello-timeout"), help: "ms") var helloTimeout: Int?
  @Option(name: .customLong("webhook-url")) var webhookURL: String?
  @Option(name: .customLong("webhook-secret")) var webhookSecret: String?
  @Option(name: .customLong("tls-ca-file"), help: "PEM trust roots added to the system's for outbound TLS (webhooks, push, rediss://).")
  var tlsCAFile: String?
  @Option(name: .customLong("tls-cert"), help: "PEM certificate chain: serve wss:// and https:// only.") var tlsCert: String?
  @Option(name: .customLong("tls-key"), help: "PEM private key (ECDSA or RSA) of --tls-cert.") var tlsKey: String?
  @Option(
    help:
      "redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB] or redis[s]+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER[/DB][?sentinel_user=U&sentinel_password=P]: run as a node of a cluster sharing this Redis."
  ) var redis: String?
  @Option(
    name: .customLong("redis-min-replicas"),
    help: "cluster: replicas that must hold a record before it counts (default 1 with Sentinel, 0 without)")
  var redisMinReplicas: Int?
  @Option(name: .customLong("node-id"), help: "This node's name in a cluster (default: random, logged).") var nodeId: String?
  @Option(name: .customLong("node-timeout"), help: "ms of silence after which a cluster node is dead") var nodeTimeout: Int?
  @Option(name: .customLong("snapshot-records"), help: "cluster and --data-dir: records between snapshots of the state")
  var snapshotRecords: Int?
  @Option(name: .customLong("snapshot-bytes"), help: "cluster and --data-dir: bytes of records between snapshots of the state")
  var snapshotBytes: Int?
  @Flag(name: .customLong("redis-skip-policy-check"), help: "cluster: trust Redis's maxmemory-policy without reading it")
  var redisSkipPolicyCheck = false
  @Option(
    name: .customLong("data-dir"),
    help: "Standalone: keep the state in this directory (log + snapshots) so a restart loses nothing; see docs/operating.md.")
  var dataDir: String?
  @Option(name: .customLong("fsync"), help: "With --data-dir: always|everysec|no (default everysec), as Redis's appendfsync.")
  var fsync: String?
  @Option(name: .customLong("log-level"), help: "trace|debug|info|notice|warning|error") var logLevel: String?
  @OptionGroup(title: "Push providers") var push: PushOptions

  func run() throws {
    var config = try makeConfig()
    let logger = makeLogger()
    config.tlsCertFile = tlsCert ?? Env.string("tls-cert")
    config.tlsKeyFile = tlsKey ?? Env.string("tls-key")
    guard (config.tlsCertFile == nil) == (config.tlsKeyFile == nil) else {
      throw ValidationError("--tls-cert and --tls-key go together")
    }
    if let url = redis ?? Env.string("redis") {
      guard let target = RedisTarget(url: url) else {
        throw ValidationError(
          "--redis wants redis[s]://[[USER]:PASSWORD@]HOST:PORT[/DB] or redis[s]+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER[/DB]"
        )
      }
      var cluster = try makeCluster(target)
      let caFile = tlsCAFile ?? Env.string("tls-ca-file")
      do {
        try cluster.loadTLS(caFile: caFile)
      } catch {
        throw ValidationError("rediss:// cannot use the trust roots (--tls-ca-file \(caFile ?? "none")): \(error)")
      }
      if let v = try nodeTimeout ?? Env.int("node-timeout") {
        guard v > 0 else { throw ValidationError("--node-timeout must be positive") }
        cluster.nodeTimeoutMs = Int64(v)
      }
      if let v = try snapshotRecords ?? Env.int("snapshot-records") {
        guard v > 0 else { throw ValidationError("--snapshot-records must be positive") }
        cluster.snapshotRecords = UInt64(v)
      }
      if let v = try snapshotBytes ?? Env.int("snapshot-bytes") {
        guard v > 0 else { throw ValidationError("--snapshot-bytes must be positive") }
        cluster.snapshotBytes = UInt64(v)
      }
      cluster.skipPolicyCheck = redisSkipPolicyCheck || Env.string("redis-skip-policy-check") == "1"
      // Rolling-upgrade tests run two "builds" that differ in rules version.
      if let v = try Env.int("test-rules-version"), let r = UInt32(exactly: v) { cluster.rulesVersion = r }
      config.cluster = cluster
      logger.info(
        "cluster mode",
        metadata: ["node": "\(cluster.nodeId)", "redis": "\(target.description)", "min-replicas": "\(cluster.minReplicas)"])
    }
    config.durable = try makeDurable(config)
    if let durable = config.durable {
      logger.info("data dir", metadata: ["dir": "\(durable.dir)", "fsync": "\(durable.fsync.rawValue)"])
    }
    if config.devMode {
      guard ServerConfig.isLoopback(config.host) else {
        logger.critical("dev mode (no --secret) binds loopback addresses only; refusing \(config.host)")
        throw ExitCode(2)
      }
      logger.warning("DEV MODE: no --secret; hello.dev accepted without a token, any user may join any session")
    }
    config.core.devMode = config.devMode
    config.push = try push.settings()
    let server = RelayServer(config: config, logger: logger, verifyToken: Tokens.verifier(secret: config.secret))
    do {
      try server.start()
    } catch let refusal as DataDirRefusal {
      logger.critical("\(refusal)")
      throw ExitCode(3)
    } catch {
      logger.critical("cannot start on \(config.host):\(config.port): \(error)")
      throw ExitCode(1)
    }
    server.run()
    if server.exitCode != 0 { throw ExitCode(server.exitCode) }
  }

  /// The cluster settings of `--redis`, `--node-id` and `--redis-min-replicas`.
  private func makeCluster(_ target: RedisTarget) throws -> ClusterConfig {
    let nodeId = nodeId ?? Env.string("node-id") ?? Self.randomNodeId()
    var cluster: ClusterConfig
    switch target {
    case .direct(let address):
      cluster = ClusterConfig(redis: address, nodeId: nodeId)
    case .sentinel(let sentinel):
      cluster = ClusterConfig(redis: sentinel.primary(host: "127.0.0.1", port: 6379), nodeId: nodeId)
      cluster.sentinel = sentinel
      cluster.minReplicas = 1
    }
    if let v = try redisMinReplicas ?? Env.int("redis-min-replicas") {
      guard (0...64).contains(v) else { throw ValidationError("--redis-min-replicas must be 0…64") }
      cluster.minReplicas = v
    }
    return cluster
  }

  /// `--data-dir` and `--fsync` (contract §12a); a data dir is the single node's, so
  /// not with `--redis` (the cluster keeps its state in Redis).
  private func makeDurable(_ config: ServerConfig) throws -> DurableConfig? {
    let mode = fsync ?? Env.string("fsync")
    guard let dir = dataDir ?? Env.string("data-dir"), !dir.isEmpty else {
      if mode != nil { throw ValidationError("--fsync needs --data-dir") }
      return nil
    }
    guard config.cluster == nil else {
      throw ValidationError("--data-dir is for a single node; a cluster (--redis) keeps its state in Redis")
    }
    var durable = DurableConfig(dir: dir)
    if let mode {
      guard let m = DurableConfig.Fsync(rawValue: mode) else { throw ValidationError("--fsync wants always, everysec or no") }
      durable.fsync = m
    }
    if let v = try snapshotRecords ?? Env.int("snapshot-records") {
      guard v > 0 else { throw ValidationError("--snapshot-records must be positive") }
      durable.snapshotRecords = UInt64(v)
    }
    if let v = try snapshotBytes ?? Env.int("snapshot-bytes") {
      guard v > 0 else { throw ValidationError("--snapshot-bytes must be positive") }
      durable.snapshotBytes = UInt64(v)
    }
    // Tests of a data dir written by another version run the same binary as another.
    if let v = try Env.int("test-rules-version"), let r = UInt32(exactly: v) { durable.rulesVersion = r }
    return durable
  }

  static func randomNodeId() -> String {
    "node-" + String(UInt32.random(in: 0...UInt32.max), radix: 16)
  }

  private func makeLogger() -> Logger {
    var logger = Logger(label: "relay")
    let level = logLevel ?? Env.string("log-level") ?? "info"
    logger.logLevel = Logger.Level(rawValue: level) ?? .info
    return logger
  }
}
