public import RelayCore

/// Everything the I/O shell needs to know at start. Durations in milliseconds
/// (contract: every duration in flags and protocol is ms).
public struct ServerConfig: Sendable {
  public var host = "127.0.0.1"
  public var port = 8080
  /// Enables `GET /v1/echo`, the plain echo used by RFC 6455 conformance suites.
  public var echo = false
  /// Serves the demo page and the JavaScript client under `GET /demo` (DemoRoutes.swift).
  public var demo = false
  /// HS256 secret; nil means dev mode (loopback only, `hello.dev`).
  public var secret: String?
  /// Bearer key of the admin API; nil means every admin request gets 401.
  public var adminKey: String?
  public var maxMessageBytes = 65_536
  public var maxOutboundBytes = 1_048_576
  /// RFC 7230 leaves head limits to servers; the contract fixes 8 KiB and 10 s.
  public var maxHeadBytes = 8192
  public var headTimeoutMs: Int64 = 10_000
  /// Largest HTTP request body the admin/call API reads.
  public var maxBodyBytes = 65_536
  /// How long we wait for the peer's close frame after sending ours (RFC 6455 §7.1.1:
  /// the server should close TCP first, but give the client a moment to answer).
  public var closeHandshakeTimeoutMs: Int64 = 2_000
  /// How long a slow consumer may take to read what was in flight and our close
  /// 4008 (contract §1), and how long its queue may stand still (a reader that
  /// stopped), before its socket is closed regardless.
  public var slowConsumerCloseTimeoutMs: Int64 = 60_000
  /// `--socket-send-buffer-bytes`: `SO_SNDBUF` of every accepted socket (0: the
  /// kernel's autotuned default, up to megabytes). Bytes in the kernel are past
  /// every relay limit and ahead of every ping and close frame (protocol/ §1), so
  /// this bounds how late a slow reader sees its 4008 and how much kernel memory
  /// one connection holds (Linux keeps twice the value).
  public var socketSendBufferBytes = 65_536
  public var slowConsumerStallMs: Int64 = 10_000
  /// Busy time of a loop turn after which reads wait for a later turn
  /// (RelayServer+Turns.swift): an input storm (thousands of sockets ready at once,
  /// each with joins to answer) is spread over turns. At most
  /// `maxDeferredReadBytes` wait (each connection one read of ≤ 64 KiB). 10 ms, not
  /// more: the flush of every connection those reads wrote to follows in the same
  /// turn, so a longer budget lets a re-join pile-up push turns past protocol/ §16's
  /// 50 ms (Benchmarks/results/abuse.md, "Turn read budget").
  public var turnReadBudgetMs: Int64 = 10
  /// Most CPU time one flush pass spends writing (`Loop.flushBudgetNs`): a fan-out
  /// to thousands of members is written over several turns, round robin, each
  /// member's frames of those turns in one write, instead of one `write` per member
  /// per turn (protocol/ §16). Below the read budget, so a join storm's reads get
  /// most of the loop and each member's writes grow with it. 0 = no bound.
  public var turnWriteBudgetMs: Int64 = 2
  public var maxDeferredReadBytes = 64 << 20
  /// `--outbound-budget-bytes`: bytes queued for all connections together (0 = no
  /// bound); past it the connections holding the most are closed 4008 first.
  public var outboundBudgetBytes = 512 << 20
  /// Free heap held by the allocator above which it is given back to the system
  /// (`malloc_trim`), at most once per `heapTrimIntervalMs`.
  public var heapTrimThresholdBytes = 8 << 20
  public var heapTrimIntervalMs: Int64 = 2_000
  public var drainTimeoutMs: Int64 = 10_000
  public var webhookURL: String?
  public var webhookSecret: String?
  /// `--tls-ca-file`: PEM trust roots added to the system's for every outbound TLS
  /// connection (webhooks, push providers).
  public var tlsCAFile: String?
  public var core: CoreConfig
  /// `--tls-cert` / `--tls-key` (PEM): with both, the listener speaks TLS only.
  public var tlsCertFile: String?
  public var tlsKeyFile: String?
  /// §9a push providers (`--apns-*`, `--fcm-*`); nil: no push is sent (jobs are
  /// counted as `unconfigured`).
  public var push: PushSettings?
  /// Cluster mode (contract §12); nil runs standalone.
  public var cluster: ClusterConfig?
  /// `--data-dir` (contract §12a): standalone, the state kept on disk; nil runs in
  /// memory. Never with `cluster`.
  public var durable: DurableConfig?

  public init(core: CoreConfig) { self.core = core }

  public var devMode: Bool { secret == nil }

  /// Dev mode must never be reachable from outside the machine (contract §3).
  public static func isLoopback(_ host: String) -> Bool {
    host == "localhost" || host == "::1" || host == "[::1]" || host.hasPrefix("127.")
  }
}

/// `--data-dir` and `--fsync` (contract §12a; docs/operating.md, "Data dir").
public struct DurableConfig: Sendable {
  /// When a record is forced to the disk (`fdatasync`), as Redis's `appendfsync`.
  public enum Fsync: String, Sendable, CaseIterable {
    /// Before any answer or event the record caused goes out: one `fdatasync` per
    /// loop turn for every record of the turn (group commit).
    case always
    /// About once a second: a power loss may lose the last second of acknowledged
    /// records; a process crash loses none (they are written before the answers).
    case everysec
    /// Never: the kernel writes back when it likes (a power loss may lose more).
    case no
  }

  public var dir: String
  public var fsync = Fsync.everysec
  /// `--snapshot-records` / `--snapshot-bytes`, as in a cluster.
  public var snapshotRecords: UInt64 = 50_000
  public var snapshotBytes: UInt64 = 32 << 20
  /// The rules version this binary writes and reads (tests of a foreign data dir set
  /// another through `RELAY_TEST_RULES_VERSION`).
  public var rulesVersion: UInt32 = RelayCore.rulesVersion

  public init(dir: String) { self.dir = dir }
}
