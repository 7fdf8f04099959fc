// Every limit of the contract as a named setting with its default (PROTOCOL.md; the
// shell maps command-line flags onto these). All durations in milliseconds.

extension RelayCore {
  /// The version of the core's rules: bumped whenever the same inputs can give other
  /// outputs than the previous release gave, or a generation's keys in Redis change
  /// layout (version 3: snapshot bytes in their own key, which older nodes cannot
  /// read). Cluster nodes of one generation must agree on it (docs/cluster.md,
  /// "Versions"; a newer one takes a generation over, its hand-over written in the
  /// layout every version reads).
  public static let rulesVersion: UInt32 = 3
}

/// Limits and timings the core enforces.
public struct CoreConfig: Sendable {
  /// §3: no secret → accept only `hello.dev`, any session.
  public var devMode: Bool
  /// §1 `--max-message-bytes`; enforced by the shell's frame layer, kept here for `welcome`
  /// and for consistency checks.
  public var maxMessageBytes = 65_536
  /// §6 `--max-participants` per session → `session_full`.
  public var maxParticipants = 1_000
  /// §6 `--max-sessions-per-connection` → `rate_limited`.
  public var maxSessionsPerConnection = 16
  /// §2 `--max-bad-messages` consecutive → close 4029.
  public var maxBadMessages = 20
  /// §7a `--message-rate` per participant per `messageWindowMs` (sliding).
  public var messageRate = 20
  public var messageWindowMs: Int64 = 1_000
  /// §7 raise/lower commands per participant per `handWindowMs` (sliding).
  public var handRate = 10
  public var handWindowMs: Int64 = 10_000
  /// §6 `--join-rate`: `session.join` + `session.leave` per connection per
  /// `joinWindowMs` (sliding). 20 lets a client join its 16 sessions at once.
  public var joinRate = 20
  public var joinWindowMs: Int64 = 10_000
  /// §6 `--session-join-rate`: joins and leaves of one session per
  /// `sessionJoinWindowMs` (sliding) from all connections together; joins past it →
  /// `rate_limited` (0 = no bound). 500 lets a 1 000-member meeting fill in two
  /// windows while bounding the `participant.*` events each member must read.
  public var sessionJoinRate = 500
  public var sessionJoinWindowMs: Int64 = 10_000
  /// §3 `--max-name-bytes` / `--max-avatar-bytes`: UTF-8 bytes of an identity's
  /// `name` and `avatar` (dev `hello` and token claims) → `bad_request`, close 4501.
  public var maxNameBytes = 256
  public var maxAvatarBytes = 1_024
  /// §1: `hello` within this long of the upgrade, else close 4501.
  public var helloTimeoutMs: Int64 = 10_000
  /// §5 heartbeat values, advertised in `welcome.heartbeat`. The shell pings and
  /// times out its own sockets with them (RelayPrimitives `Heartbeats`); the core
  /// only hears of a dead socket as `closed(clean: false)`.
  public var heartbeatIntervalMs: Int64 = 10_000
  public var heartbeatTimeoutMs: Int64 = 15_000
  /// §5 grace for lost participants (normal / after `client.background true`).
  public var graceMs: Int64 = 30_000
  public var backgroundGraceMs: Int64 = 120_000
  /// §5 idle timeout of a lone participant.
  public var idleTimeoutMs: Int64 = 180_000
  /// §8 replay log bounds per session.
  public var replayEvents = 1_000
  public var replayAgeMs: Int64 = 300_000
  /// §8 `--replay-bytes`: bytes of kept events per session (0 = no bound); the oldest
  /// go first. 1 MiB holds a full `--replay-events` log of 1 KiB events.
  public var replayBytes = 1 << 20
  /// §8 `--replay-budget-bytes`: replay bytes of all sessions together (0 = no
  /// bound); past it the oldest events of any session go first.
  public var replayBudgetBytes = 256 << 20
  /// §9 `--max-ended-calls` / `--max-ended-call-bytes`: finished calls kept for
  /// idempotent repeats of HTTP call actions (FinishedCalls.swift).
  public var maxEndedCalls = 10_000
  public var maxEndedCallBytes = 16 << 20
  /// §10.1 `--ring-rate`: calls that may ring one user per `ringWindowMs` (sliding),
  /// from all callers together; past it `call.initiate` gets `rate_limited` (0 = no
  /// bound).
  public var ringRate = 10
  public var ringWindowMs: Int64 = 60_000
  /// §9a `--max-push-devices`: registered devices per user; the least recently
  /// registered goes first.
  public var maxPushDevices = 10
  /// §9 ring timeout.
  public var ringTimeoutMs: Int64 = 45_000
  /// §11 session lifecycle webhooks (`session.created`, `session.ended`); the shell
  /// turns them on when a webhook is configured (call webhooks are always emitted).
  public var sessionWebhooks = false
  /// Work one `tick` may do (RelayCore.tick): deadlines fired, and recipients of the
  /// events they caused. Counts, not time, so every replica splits a mass expiry the
  /// same way; sized so that a turn stays well under 50 ms (protocol/ §16).
  public var maxDeadlinesPerTick = 256
  public var maxTickDeliveries = 20_000
  /// `welcome.server.version`.
  public var serverVersion: String

  public init(devMode: Bool, serverVersion: String) {
    self.devMode = devMode
    self.serverVersion = serverVersion
  }
}

/// Counters for `/metrics` (§10). Dictionaries are keyed by wire names; the shell
/// sorts keys when it renders them.
public struct CoreStats: Sendable, Equatable {
  /// Open connections (opened and not yet `closed`).
  public var connections = 0
  public var sessions = 0
  public var participants = 0
  public var commandsByType: [String: UInt64] = [:]
  /// Every event the core encoded (session and personal), by `type`.
  public var eventsByType: [String: UInt64] = [:]
  /// Recipient count summed over session-event sends (fan-out deliveries).
  public var deliveries: UInt64 = 0
  public var errorsByCode: [String: UInt64] = [:]
  public var lost: UInt64 = 0
  public var restored: UInt64 = 0
  public var timedOut: UInt64 = 0
  /// §8 bytes held by all replay logs, and events dropped by a byte bound.
  public var replayBytes = 0
  public var replayEvictions: UInt64 = 0

  public init() {}
}
