// Every session event, kept for resume (§8): the last `replayEvents`, none older than
// `replayAgeMs`, at most `replayBytes` in all (and the process-wide `ReplayBudget`).
// Replay re-sends the exact bytes members saw live (same seq, same ts).
// Most entries hold the encoded payload. `participant.joined` — one per member, and
// in an idle session nearly the whole log — is kept as the joiner's shared `Profile`
// and re-encoded on replay by the same code that encoded it live: 40 bytes instead of
// a ~250-byte payload per member.
import RelayPrimitives
import RelayProtocol

/// One recorded session event, as replay sends it.
public struct ReplayEntry: Sendable {
  public let seq: Int64
  public let atMonoMs: Int64
  public let payload: Payload
}

/// What the log keeps of one event.
enum RecordedBody: Sendable {
  case payload(Payload)
  /// `participant.joined` of a fresh participant: its object is fully determined by
  /// the profile, `joinedAt` (= the event's `ts`) and status `connected`.
  case joined(Profile, wallMs: Int64)
}

/// A bounded FIFO of session events in seq order.
struct ReplayLog {
  let maxEvents: Int
  let maxAgeMs: Int64
  /// Bytes the kept events may take (`--replay-bytes`); 0 = no bound.
  let maxBytes: Int
  /// The session id, for re-encoding `participant.joined`.
  let session: String
  /// The process-wide account every log charges its bytes to.
  let budget: ReplayBudget?
  /// This log's name in the budget's eviction order (0 without a budget).
  let serial: UInt64
  private var entries = ReplayChunks()
  /// The seq of `entries.first` while the log is not empty.
  private var headSeq: Int64 = 0
  /// What the kept events cost (`cost(of:)`).
  private(set) var bytes = 0

  init(maxEvents: Int, maxAgeMs: Int64, maxBytes: Int = 0, session: String = "", budget: ReplayBudget? = nil) {
    self.maxEvents = maxEvents
    self.maxAgeMs = maxAgeMs
    self.maxBytes = maxBytes
    self.session = session
    self.budget = budget
    serial = budget?.newSerial() ?? 0
  }

  /// An event's share of a byte bound: its payload plus the entry (time, body, slot).
  /// A `participant.joined` holds a shared profile, so only its entry counts.
  static let entryBytes = 32
  private static func cost(of event: RecordedEvent) -> Int {
    switch event.body {
    case .payload(let payload): return entryBytes + payload.bytes.count
    case .joined: return entryBytes
    }
  }

  /// The kept events as they are now, for a snapshot: O(1) here, and readable on any
  /// thread while the log goes on (ReplayChunks.swift).
  var captured: ReplayCapture { ReplayCapture(oldestSeq: oldestSeq, events: entries, bytes: bytes, serial: serial) }

  /// Puts back the kept events of a snapshot, charging the budget as recording did,
  /// without trimming: the restored log holds exactly what the snapshotted one held
  /// (age bounds apply lazily, at the next record or resume, in both alike). The
  /// caller checked that the seqs end at the session's seq.
  mutating func restore(oldestSeq: Int64, _ events: [(atMonoMs: Int64, body: RecordedBody)]) {
    precondition(count == 0, "restoring into a log that holds events")
    headSeq = oldestSeq
    for (atMonoMs, body) in events {
      let event = RecordedEvent(atMonoMs: atMonoMs, body: body)
      entries.append(event)
      let cost = Self.cost(of: event)
      bytes += cost
      budget?.charge(cost, events: 1)
    }
  }

  /// Gives the log's bytes back to the budget (its session is being freed).
  func releaseAll() {
    budget?.charge(-bytes, events: -count)
    budget?.forget(serial)
  }

  var count: Int { entries.count }
  var oldestSeq: Int64? { entries.isEmpty ? nil : headSeq }

  mutating func append(_ entry: ReplayEntry) {
    record(seq: entry.seq, atMonoMs: entry.atMonoMs, .payload(entry.payload))
  }

  /// Events must come in seq order without gaps, as a session numbers them (§2).
  mutating func record(seq: Int64, atMonoMs: Int64, _ body: RecordedBody) {
    if count == 0 {
      headSeq = seq
    } else {
      precondition(seq == headSeq + Int64(count), "replay log seqs must be consecutive")
    }
    let event = RecordedEvent(atMonoMs: atMonoMs, body: body)
    entries.append(event)
    let cost = Self.cost(of: event)
    bytes += cost
    budget?.charge(cost, events: 1)
    trim(now: atMonoMs)
  }

  /// Drops entries beyond the count or byte bound or older than the age bound.
  mutating func trim(now nowMonoMs: Int64) {
    while count > maxEvents { dropOldest() }
    while maxBytes > 0, bytes > maxBytes, count > 0 {
      dropOldest()
      budget?.countEviction()
    }
    while let oldest = entries.first, nowMonoMs - oldest.atMonoMs > maxAgeMs { dropOldest() }
    if let broken = Self.violation(count: count, bytes: bytes, maxEvents: maxEvents, maxBytes: maxBytes) {
      fatalError(broken)
    }
  }

  /// The bounds a trimmed log keeps, by name: nil when `count` events of `bytes` fit.
  static func violation(count: Int, bytes: Int, maxEvents: Int, maxBytes: Int) -> String? {
    if count > maxEvents { return "replay log bound: \(count) events kept, at most \(maxEvents)" }
    if maxBytes > 0 && bytes > maxBytes { return "replay log bound: \(bytes) bytes kept, at most \(maxBytes)" }
    if bytes < 0 || (count == 0 && bytes != 0) { return "replay log accounting: \(bytes) bytes for \(count) events" }
    return nil
  }

  private mutating func dropOldest() {
    let cost = Self.cost(of: entries[0])
    entries.dropFirst()
    bytes -= cost
    budget?.charge(-cost, events: -1)
    headSeq += 1
  }

  /// The process-wide budget is exceeded and this log holds the oldest event.
  mutating func dropOldestForBudget() {
    guard count > 0 else { return }
    dropOldest()
    budget?.countEviction()
    if count == 0 { entries.removeAll() }
  }

  /// The events with seq > `afterSeq` up to `lastSeq` (the session's current seq), or nil
  /// when some of them are no longer kept (→ fresh `session.joined`, recovered: false).
  mutating func events(after afterSeq: Int64, lastSeq: Int64, now nowMonoMs: Int64) -> [ReplayEntry]? {
    trim(now: nowMonoMs)
    guard afterSeq <= lastSeq else { return nil }
    if afterSeq == lastSeq { return [] }
    guard let oldest = oldestSeq, oldest <= afterSeq + 1 else { return nil }
    let start = Int(afterSeq + 1 - oldest)
    return (start..<entries.count).map { i in
      let seq = headSeq + Int64(i)
      let event = entries[i]
      return ReplayEntry(seq: seq, atMonoMs: event.atMonoMs, payload: payload(of: event, seq: seq))
    }
  }

  private func payload(of event: RecordedEvent, seq: Int64) -> Payload {
    switch event.body {
    case .payload(let payload): return payload
    case .joined(let profile, let wallMs):
      return encodeEvent("participant.joined", session: session, seq: seq, wallMs: wallMs) { w in
        w.joinedParticipant(profile, wallMs: wallMs)
      }
    }
  }
}
