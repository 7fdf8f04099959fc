import RelayPrimitives

/// The decisions of a cluster node's append path (docs/cluster.md, "The log",
/// "Backpressure", "Redis high availability"), with Redis's replies and the reader's
/// progress as events and what to send or answer as effects: the libuv/RESP adapter
/// (ClusterNode+Append.swift) only turns replies into events and applies effects.
///
/// A batch is one record (one append script call) carrying the commands of one loop
/// turn. Its commands are answered once: by applying its record when this node's
/// reader reads it back (the replica's outputs), or `unavailable` when it cannot be
/// in the log. A record read back is never answered again; a batch whose reply was
/// lost (the connection ended) is decided only after the reader, reconnected into
/// the same generation, has read the log again to its end: found there, applying it
/// answered it; not found, `unavailable`. A batch still undecided `undecidedLimitMs`
/// after it was first seen so (Redis has not come back) is answered `unavailable`
/// then: a client never waits without end, and an `unavailable` command may still
/// take effect (docs/cluster.md). A short `WAIT` leaves a batch undecided the same way.
public struct AppendDriver: Sendable {
  public typealias Token = UInt64

  /// How long an append waits for the replicas (`WAIT N deadline`): the append deadline.
  public static let replicationWaitMs: UInt64 = 1_000
  /// How long a batch whose fate is unknown waits for the reader's re-read.
  public static let undecidedLimitMs: UInt64 = 10_000

  public enum Event: Equatable, Sendable {
    /// A batch to log, as the record's bytes (the `e` field the log will hold).
    case append(Token, record: [UInt8])
    /// The append script's reply.
    case scriptReply(Token, ScriptReply)
    /// `WAIT`'s reply after a stored append (`nil`: the connection ended first).
    case waitReply(Token, WaitAnswer?)
    /// A record this node's replica applied (its `e` field), whichever node logged it.
    case applied(record: [UInt8])
    /// The connections are up again in the same generation; the reader reads on
    /// from the last record it applied.
    case reconnected
    /// A read issued after `reconnected` (or any later one) reached the log's end.
    case caughtUp
    /// The history the batches went to is gone (a new generation, the node stopped):
    /// nothing in flight can be read back any more.
    case historyEnded
    /// `SCRIPT LOAD` of the append script answered its SHA1.
    case scriptLoaded
    /// `ROLE` on connecting: `n` replicas in sync with the primary.
    case replicas(Int64)
    /// The clock, now and then (the node's housekeeping beat): batches undecided for
    /// `undecidedLimitMs` are answered `unavailable`.
    case expire(nowMs: UInt64)
  }

  public enum ScriptReply: Equatable, Sendable {
    /// A stream id: the record is in the log.
    case stored
    /// `NOSCRIPT`: Redis forgot the script (restarted or flushed).
    case noScript
    /// `RESET …`: the generation changed or its keys are gone.
    case reset(String)
    case error(String)
    /// No reply: the connection ended (its limit passed, or it broke).
    case lost
  }

  public enum Effect: Equatable, Sendable {
    /// Run the append script for this batch (`EVALSHA` when `bySHA`, else `EVAL`).
    case sendAppend(Token, record: [UInt8], bySHA: Bool)
    /// `SCRIPT LOAD` the scripts again.
    case loadScripts
    /// `WAIT replicas deadline` on the appending connection.
    case sendWait(Token, replicas: Int)
    /// The batch's commands are answered `unavailable` (socket closes kept to retry).
    case fail(Token)
    /// The batch's record was applied: its commands got their answers from it.
    case settled(Token)
    /// The pipeline passed its high mark: stop reading the sockets that feed it.
    case pauseReading
    /// It drained under its low marks: read them again.
    case resumeReading
    /// An append failed for this reason (logged, rate-limited; `READONLY` makes a
    /// node with sentinels ask them again).
    case appendError(String)
    /// The generation changed under the node: reconnect, bootstrap, reset.
    case generationLost(String)
  }

  private enum Phase: Equatable, Sendable {
    case scripting, waiting, stored, unknown
    /// Redis owes no more replies for this batch.
    var replied: Bool { self == .stored || self == .unknown }
  }

  private struct Batch: Sendable {
    let key: RecordKey
    var record: [UInt8] { key.bytes }
    var phase = Phase.scripting
    /// The reader read it back and applied it.
    var applied = false
    /// Lost or unread at a reconnect: decided at the next `caughtUp`.
    var recheck = false
    /// When an `expire` first found it undecided.
    var undecidedSinceMs: UInt64?
    /// Its fate waits on the reader: no reply came, or a reconnect asked for a re-read.
    var undecided: Bool { !applied && (phase == .unknown || recheck) }
  }

  public private(set) var pipeline: AppendPipeline
  public var policy: ReplicaPolicy
  /// Appends are failing (OOM, READONLY, timeouts, replicas short…): the node is not
  /// ready until one succeeds again.
  /// The reader's waits for the replicas set it too (ClusterNode+Failover.swift).
  public var failing = false
  private var batches: [Token: Batch] = [:]
  /// Unapplied batches by record, oldest first: a record read back is matched to the
  /// oldest batch that sent those bytes (equal bytes are interchangeable answers;
  /// `NOSCRIPT` resends may reorder records against the sends).
  private var unread: [RecordKey: [Token]] = [:]
  private var scriptLoaded = false

  public init(policy: ReplicaPolicy, pipeline: AppendPipeline = AppendPipeline()) {
    self.policy = policy
    self.pipeline = pipeline
  }

  /// Batches not yet settled or failed.
  public var inFlight: Int { batches.count }

  public mutating func handle(_ event: Event) -> [Effect] {
    var out: [Effect] = []
    switch event {
    case .append(let t, let record): append(t, record, &out)
    case .scriptReply(let t, let reply): scriptReplied(t, reply, &out)
    case .waitReply(let t, let answer): waited(t, answer, &out)
    case .applied(let record): applied(record, &out)
    case .reconnected:
      for (t, b) in batches where !b.applied { batches[t]?.recheck = true }
    case .caughtUp: decide({ $0.recheck && $0.phase.replied }, &out)
    case .historyEnded: decide({ _ in true }, &out)
    case .scriptLoaded: scriptLoaded = true
    case .replicas(let n): policy.note(n)
    case .expire(let now): expire(now, &out)
    }
    return out
  }

  private mutating func expire(_ now: UInt64, _ out: inout [Effect]) {
    for t in batches.keys.sorted() {
      guard let batch = batches[t], batch.undecided else { continue }
      guard let since = batch.undecidedSinceMs else {
        batches[t]?.undecidedSinceMs = now
        continue
      }
      guard now >= since + Self.undecidedLimitMs else { continue }
      if !batch.phase.replied { replied(t, &out) }
      drop(t, &out)
    }
  }

  private mutating func append(_ t: Token, _ record: [UInt8], _ out: inout [Effect]) {
    let key = RecordKey(record)
    batches[t] = Batch(key: key)
    unread[key, default: []].append(t)
    let wasFull = pipeline.isFull
    pipeline.sent(bytes: record.count)
    out.append(.sendAppend(t, record: record, bySHA: scriptLoaded))
    if pipeline.isFull && !wasFull { out.append(.pauseReading) }
  }

  private mutating func scriptReplied(_ t: Token, _ reply: ScriptReply, _ out: inout [Effect]) {
    guard let batch = batches[t], batch.phase == .scripting else { return }
    switch reply {
    case .stored where policy.minReplicas > 0:
      batches[t]?.phase = .waiting
      out.append(.sendWait(t, replicas: policy.required))
    case .stored:
      stored(t, &out)
    case .noScript:
      // Sent again whole (it still counts in the pipeline) and loaded for the next ones.
      scriptLoaded = false
      out += [.sendAppend(t, record: batch.record, bySHA: false), .loadScripts]
    case .reset(let message):
      refused(t, &out)
      out.append(.generationLost(message))
    case .error(let message):
      failed(t, message, &out)
    case .lost:
      lost(t, &out)
    }
  }

  private mutating func waited(_ t: Token, _ answer: WaitAnswer?, _ out: inout [Effect]) {
    guard batches[t]?.phase == .waiting else { return }
    switch answer {
    case .count(let n)?:
      policy.note(n)
      let wanted = policy.required
      guard n >= Int64(wanted) else {
        let ms = Self.replicationWaitMs
        return undecided(t, "NOREPLICAS \(n) of \(wanted) replicas confirmed within \(ms) ms", &out)
      }
      stored(t, &out)
    case .error(let message)?:
      // The record is in the log (the script stored it): a refused `WAIT` (the
      // primary demoted meanwhile, say) says nothing about whether it survives.
      undecided(t, message, &out)
    case nil:
      lost(t, &out)
    }
  }

  /// In the log (and on the replicas asked for): its answers come from applying it.
  private mutating func stored(_ t: Token, _ out: inout [Effect]) {
    failing = false
    batches[t]?.phase = .stored
    replied(t, &out)
  }

  /// Redis said no: the record is not in the log.
  private mutating func failed(_ t: Token, _ message: String, _ out: inout [Effect]) {
    failing = true
    out.append(.appendError(message))
    refused(t, &out)
  }

  private mutating func refused(_ t: Token, _ out: inout [Effect]) {
    batches[t]?.phase = .stored  // no more replies owed; `drop` answers it
    replied(t, &out)
    drop(t, &out)
  }

  /// No reply: the record may or may not be in the log; the reader decides.
  private mutating func lost(_ t: Token, _ out: inout [Effect]) {
    undecided(t, "no reply (connection lost or timed out)", &out)
  }

  /// The record's fate is not known yet: no reply, or in the log but not (yet) on the
  /// replicas asked for (a short `WAIT`: it counts once they hold it, or vanishes
  /// with the primary). Nothing is answered before the reader decides — it applies a
  /// record only once the replicas hold it, which answers the commands — or
  /// `undecidedLimitMs` passes (`unavailable`). An early `unavailable` for a record
  /// that then counts would let, say, a resume spend its token on a socket the node
  /// had already closed, and the client would find its session gone (§8).
  private mutating func undecided(_ t: Token, _ message: String, _ out: inout [Effect]) {
    failing = true
    out.append(.appendError(message))
    batches[t]?.phase = .unknown
    replied(t, &out)
  }

  /// Redis owes nothing more for `t`: the pipeline counts it answered; a batch
  /// already read back is done.
  private mutating func replied(_ t: Token, _ out: inout [Effect]) {
    guard let batch = batches[t] else { return }
    if pipeline.answered(bytes: batch.record.count) { out.append(.resumeReading) }
    if batch.applied { batches[t] = nil }
  }

  private mutating func applied(_ record: [UInt8], _ out: inout [Effect]) {
    let key = RecordKey(record)
    guard var waiting = unread[key], !waiting.isEmpty else { return }
    let t = waiting.removeFirst()
    unread[key] = waiting.isEmpty ? nil : waiting
    guard let batch = batches[t] else { return }
    out.append(.settled(t))
    if batch.phase.replied { batches[t] = nil } else { batches[t]?.applied = true }
  }

  /// Answers `unavailable` for every unapplied batch `which` selects, oldest first.
  private mutating func decide(_ which: (Batch) -> Bool, _ out: inout [Effect]) {
    for t in batches.keys.sorted() where batches[t].map({ !$0.applied && which($0) }) == true {
      if batches[t]?.phase.replied == false { replied(t, &out) }
      drop(t, &out)
    }
  }

  /// Forgets an unapplied batch and answers its commands `unavailable`.
  private mutating func drop(_ t: Token, _ out: inout [Effect]) {
    guard let batch = batches.removeValue(forKey: t) else { return }
    guard !batch.applied else { return }
    if var waiting = unread[batch.key], let i = waiting.firstIndex(of: t) {
      waiting.remove(at: i)
      unread[batch.key] = waiting.isEmpty ? nil : waiting
    }
    out.append(.fail(t))
  }
}

/// A record's bytes as a dictionary key, hashed once, over its bytes as one block.
/// `[UInt8]`'s own `Hashable` feeds the hasher one element at a time, and every
/// lookup and store hashes the key again; records are a loop turn's commands, often
/// kilobytes, and each is looked up when sent and when read back. The table is only
/// looked up, never iterated, so the hash's per-process seed cannot reach an output.
struct RecordKey: Hashable, Sendable {
  let bytes: [UInt8]
  private let digest: Int

  init(_ bytes: [UInt8]) {
    self.bytes = bytes
    var hasher = Hasher()
    bytes.withUnsafeBytes { hasher.combine(bytes: $0) }
    digest = hasher.finalize()
  }

  static func == (a: RecordKey, b: RecordKey) -> Bool { a.digest == b.digest && a.bytes == b.bytes }

  func hash(into hasher: inout Hasher) { hasher.combine(digest) }
}
