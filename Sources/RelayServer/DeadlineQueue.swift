/// Deadlines that all share one constant timeout (request-head timeout, close
/// handshake timeout): arrival order is deadline order, so a FIFO replaces a heap
/// and an entry costs O(1). Entries are checked lazily: a connection that moved on
/// is simply skipped when its entry comes due. No libuv timer per connection.
struct FIFODeadlines {
  private var ids: [UInt64] = []
  private var dueMs: [Int64] = []
  private var head = 0

  mutating func add(_ id: UInt64, dueMs due: Int64) {
    ids.append(id)
    dueMs.append(due)
  }

  /// Removes and returns every id whose deadline is at or before `nowMs`.
  mutating func popDue(nowMs: Int64) -> [UInt64] {
    var out: [UInt64] = []
    while head < ids.count, dueMs[head] <= nowMs {
      out.append(ids[head])
      head += 1
    }
    compactIfWorthIt()
    return out
  }

  var nextDueMs: Int64? { head < dueMs.count ? dueMs[head] : nil }

  private mutating func compactIfWorthIt() {
    if head > 0 && head == ids.count {
      // All popped: give the memory back rather than keep the high-water capacity
      // (a burst of accepts would otherwise pin 16 bytes per connection for good).
      ids = []
      dueMs = []
      head = 0
      return
    }
    guard head > 1024, head * 2 > ids.count else { return }
    ids.removeFirst(head)
    dueMs.removeFirst(head)
    head = 0
  }
}
