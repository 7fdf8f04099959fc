import RelayCrypto
// State shared by every bot of one run: options, counters, checks, ledgers and
// a seeded random source. One instance, owned by the engine, used only from
// the loop thread (bots hold it strongly: it holds no bot, so no cycle).

import EventLoop
import RelayProtocol
import RelayPrimitives

/// Which server the bots talk to.
enum WireProtocol: String {
  /// The relay (PROTOCOL.md): hello, session.join, commands and session events.
  case relay
  /// A plain room broadcast server: `/<room>`, every text frame goes to all.
  case broadcast
}

/// How bots identify themselves to the relay (§3).
enum Identity {
  case dev
  case token(TokenMinter)
}

/// Command-line options that shape a run.
struct RunOptions {
  /// `--url`, one or more: bots spread over them round-robin (bot i starts on
  /// `urls[i % count]`) and every reconnect moves a bot to the next one, so a
  /// cluster's nodes (§12) each serve a share and resumes cross nodes.
  var urls: [WebSocketURL]
  /// The first URL (the report's headline).
  var url: WebSocketURL { urls[0] }
  var wire: WireProtocol
  var identity: Identity
  var durationMs: Int?
  var shardIndex = 0
  var shardCount = 1
  var seed: UInt64 = 1
  var progress = true
  var maxMessageBytes = 1 << 20
  /// Log every message this bot sends and receives (debugging a check).
  var traceUid: String?
  /// Test-only fault injection (`--fault`): proves the checks still fail.
  var fault: Fault?
  /// For `wss://` URLs: the client TLS context (`--ca`, `--insecure`).
  var tls: TLSContext?
}

/// Every `every`th message event a bot receives is discarded before any
/// check sees it, or handled twice: what a server that lost or repeated a
/// delivery would look like to the bots.
struct Fault {
  enum Kind: String { case dropMessage = "drop-message", duplicateMessage = "duplicate-message" }
  var kind: Kind
  var every: Int

  /// `drop-message:N` or `duplicate-message:N`.
  init?(_ text: String) {
    let parts = text.split(separator: ":")
    guard parts.count == 2, let kind = Kind(rawValue: String(parts[0])), let n = Int(parts[1]), n >= 1 else {
      return nil
    }
    self.kind = kind
    every = n
  }
}

/// A set of seqs as a bitmap: message seqs per session, recorded by every
/// receiver at fan-out rates, so it must be cheap and idempotent.
struct SeqBitmap {
  private var words: [UInt64] = []

  mutating func insert(_ seq: Int) {
    guard seq >= 0, seq < 1 << 26 else { return }
    let w = seq >> 6
    if w >= words.count { words.append(contentsOf: repeatElement(0, count: w - words.count + 1)) }
    words[w] |= 1 << UInt64(seq & 63)
  }

  func members() -> [Int] {
    var out: [Int] = []
    for (w, word) in words.enumerated() where word != 0 {
      for b in 0..<64 where word & (1 << UInt64(b)) != 0 { out.append(w << 6 | b) }
    }
    return out
  }
}

/// The message seqs of one session, as observed by any of its members.
final class MessageLedger {
  // Unchecked: see `Stats` (one insert per delivery, never overlapping).
  @exclusivity(unchecked) var seqs = SeqBitmap()
}

final class RunContext {
  let loop: Loop
  let scenario: Scenario
  let options: RunOptions
  let stats = Stats()
  let checker = Checker()
  let calls = CallLedger()
  var random: SeededRandom
  /// Message seqs observed per session (relay protocol); bots keep a
  /// reference to their session's ledger so the hot path does no lookup.
  private(set) var messageSeqs: [String: MessageLedger] = [:]
  /// Broadcast protocol: deliveries expected from sends (room size at send time).
  var broadcastExpected = 0
  /// Last hand command's send time per "session|uid", to time hand events.
  var handSentNs: [String: UInt64] = [:]
  /// First-seen send time per "session|seq" of a hand event, so every member's
  /// receipt of the same event is timed from the same command.
  var handEventNs: [String: UInt64] = [:]
  /// Behaviours run only in this phase; publishers stop when it ends.
  var running = false
  /// Ringing turned off after the relay answered `unknown_type` to a call command.
  var ringingSupported = true
  var messageCounter: UInt64 = 0
  /// Message events seen by the fault injector (`RunOptions.fault`).
  var faultCounter = 0
  /// From `welcome.heartbeat.timeout` (§5): when the relay declares a silent bot lost.
  var heartbeatTimeoutMs = 15_000
  /// Sessions whose `seq` went back (§12: a Redis that lost its data resets
  /// them): the message ledger mixes both numberings, so their deliveries
  /// cannot be counted.
  var resetSessions: Set<String> = []
  /// Last 1012 close (§12: a node rejoining, or the shared state reset): a
  /// resume after it may rightly find nothing.
  var lastRestartCloseMs: UInt64?
  /// From `welcome.heartbeat.interval` (§5): how often the relay pings.
  var heartbeatIntervalMs = 10_000
  @exclusivity(unchecked) private(set) var lastEventMs: UInt64 = 0

  init(loop: Loop, scenario: Scenario, options: RunOptions) {
    self.loop = loop
    self.scenario = scenario
    self.options = options
    random = SeededRandom(seed: options.seed)
  }

  var nowMs: UInt64 { UInt64(loop.nowMs) }

  func ledger(for session: String) -> MessageLedger {
    if let l = messageSeqs[session] { return l }
    let l = MessageLedger()
    messageSeqs[session] = l
    return l
  }

  func sawEvent() {
    stats.eventsReceived += 1
    lastEventMs = nowMs
  }

  func nextMessageNumber() -> UInt64 {
    messageCounter += 1
    return messageCounter
  }

  /// A command answered `error`: expected by the scenario, or a failure.
  func unexpectedError(code: String, command: String, uid: String, message: String) {
    stats.errorsReceived += 1
    if scenario.allowedErrors.contains(code) {
      checker.pass(.unexpectedError)
    } else {
      checker.fail(.unexpectedError, "\(uid) \(command): \(code) \(message)")
    }
  }

  func disableRinging() {
    if ringingSupported { checker.note("ringing unsupported by this server (call.* → unknown_type): skipped") }
    ringingSupported = false
  }
}
