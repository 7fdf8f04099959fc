// Every session event, kept for resume (§8): the last `replayEvents`, none older than
// `replayAgeMs`. Entries hold the encoded payload, so replay re-sends the exact bytes
// members saw live (same seq, same ts).

/// One recorded session event.
public struct ReplayEntry: Sendable {
  public let seq: Int64
  public let atMonoMs: Int64
  public let payload: Payload
}

/// A bounded FIFO of session events in seq order.
struct ReplayLog {
  let maxEvents: Int
  let maxAgeMs: Int64
  private var entries: [ReplayEntry] = []
  private var head = 0  // index of the oldest live entry

  init(maxEvents: Int, maxAgeMs: Int64) {
    self.maxEvents = maxEvents
    self.maxAgeMs = maxAgeMs
  }

  var count: Int { entries.count - head }
  var oldestSeq: Int64? { head < entries.count ? entries[head].seq : nil }

  mutating func append(_ entry: ReplayEntry) {
    entries.append(entry)
    trim(now: entry.atMonoMs)
  }

  /// Drops entries beyond the count bound or older than the age bound.
  mutating func trim(now nowMonoMs: Int64) {
    while count > maxEvents { head += 1 }
    while head < entries.count, nowMonoMs - entries[head].atMonoMs > maxAgeMs { head += 1 }
    // Compact once the dead prefix dominates, keeping append amortized O(1).
    if head > 64 && head * 2 >= entries.count {
      entries.removeFirst(head)
      head = 0
    }
  }

  /// The events with seq > `afterSeq` up to `lastSeq` (the session's current seq), or nil
  /// when some of them are no longer kept (→ fresh `session.joined`, recovered: false).
  mutating func events(after afterSeq: Int64, lastSeq: Int64, now nowMonoMs: Int64) -> [ReplayEntry]? {
    trim(now: nowMonoMs)
    guard afterSeq <= lastSeq else { return nil }
    if afterSeq == lastSeq { return [] }
    guard let oldest = oldestSeq, oldest <= afterSeq + 1 else { return nil }
    let start = head + Int(afterSeq + 1 - oldest)
    return Array(entries[start...])
  }
}
