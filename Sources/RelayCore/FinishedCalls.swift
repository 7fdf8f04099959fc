// Finished calls are kept `CallBook.retentionMs` so that a repeated HTTP call action
// or a late command gets its idempotent answer or `conflict` (§9, §11). Callers choose
// how many calls and how much metadata that is, so the kept calls are also bounded in
// number (`--max-ended-calls`) and bytes (`--max-ended-call-bytes`): past either, the
// oldest finished calls are forgotten early, and a repeat about one of them is then a
// 404 like any unknown call.

import RelayPrimitives

/// Finished calls in the order they finished, with what they hold.
struct FinishedCalls {
  private var order = FIFOQueue<(id: String, bytes: Int)>()
  private(set) var count = 0
  private(set) var bytes = 0
  /// Calls forgotten before their retention was over.
  private(set) var evicted: UInt64 = 0

  init() {}

  /// The calls still counted, oldest first, with what each was charged: for snapshots.
  var counted: [(id: String, bytes: Int)] { Array(order.elements) }

  /// The account a snapshot describes; count and bytes follow from the entries.
  init(restoring entries: [(id: String, bytes: Int)], evicted: UInt64) {
    order = FIFOQueue(entries)
    count = entries.count
    bytes = entries.reduce(0) { $0 + $1.bytes }
    self.evicted = evicted
  }

  /// What a finished call holds: the object and its callees, ids, metadata.
  static func cost(of call: Call) -> Int {
    var n = 256 + call.id.utf8.count + call.sessionId.utf8.count + (call.metadata?.count ?? 0)
    for uid in call.to { n += 96 + uid.utf8.count }
    return n
  }

  mutating func add(_ call: Call) {
    let cost = Self.cost(of: call)
    order.append((call.id, cost))
    count += 1
    bytes += cost
  }

  /// The oldest finished call still counted, and takes it out of the account.
  mutating func popOldest() -> String? {
    guard let oldest = order.popFirst() else { return nil }
    count -= 1
    bytes -= oldest.bytes
    return oldest.id
  }

  mutating func countEviction() { evicted += 1 }

  /// The id of the oldest finished call still counted.
  var oldest: String? { order.first?.id }
}

extension RelayCore {
  /// Makes room for finished calls: the oldest go while either bound is exceeded.
  /// Entries whose call was already purged by its retention deadline are skipped.
  func boundFinishedCalls(at: Instant) {
    while calls.finished.count > config.maxEndedCalls || calls.finished.bytes > config.maxEndedCallBytes {
      guard let id = calls.finished.popOldest() else { return }
      guard let call = calls.calls[id] else { continue }
      calls.finished.countEviction()
      purge(call, at: at)
    }
  }
}
