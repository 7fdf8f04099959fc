// One structure for every timer of every connection, session and call (DESIGN.md,
// "The hot path": idle connections cost no per-tick work). A binary min-heap keyed by
// monotonic ms; ties break by scheduling order so firing order is deterministic.

/// What a deadline is for. Entries are never removed when they become moot; the core
/// checks on firing whether the state they refer to still wants them ("lazy
/// cancellation"), which keeps scheduling O(log n) and cancellation free.
enum DeadlineKind: Equatable {
  /// §1: `hello` not received within `helloTimeoutMs` of the upgrade.
  case hello(ConnectionID)
  /// §5 heartbeats, grace, idle countdowns (Liveness.swift).
  case liveness(LivenessDeadline)
  /// §9 ring timeout and forgetting finished calls (CallsModel.swift).
  case call(CallDeadline)
}

struct Deadline: Equatable {
  var atMonoMs: Int64
  var order: UInt64
  var kind: DeadlineKind

  func fires(before other: Deadline) -> Bool {
    atMonoMs != other.atMonoMs ? atMonoMs < other.atMonoMs : order < other.order
  }
}

/// Binary min-heap of deadlines.
struct DeadlineQueue {
  private(set) var heap: [Deadline] = []
  private var nextOrder: UInt64 = 0

  var isEmpty: Bool { heap.isEmpty }
  var count: Int { heap.count }
  var first: Deadline? { heap.first }

  mutating func schedule(at monoMs: Int64, _ kind: DeadlineKind) {
    heap.append(Deadline(atMonoMs: monoMs, order: nextOrder, kind: kind))
    nextOrder += 1
    siftUp(heap.count - 1)
  }

  /// Removes and returns the earliest deadline if it is due at `nowMonoMs`.
  mutating func popDue(_ nowMonoMs: Int64) -> Deadline? {
    guard let top = heap.first, top.atMonoMs <= nowMonoMs else { return nil }
    return popFirst()
  }

  @discardableResult
  mutating func popFirst() -> Deadline? {
    guard !heap.isEmpty else { return nil }
    heap.swapAt(0, heap.count - 1)
    let top = heap.removeLast()
    if !heap.isEmpty { siftDown(0) }
    return top
  }

  private mutating func siftUp(_ start: Int) {
    var child = start
    while child > 0 {
      let parent = (child - 1) / 2
      guard heap[child].fires(before: heap[parent]) else { return }
      heap.swapAt(child, parent)
      child = parent
    }
  }

  private mutating func siftDown(_ start: Int) {
    var parent = start
    while true {
      var best = parent
      // Two plain comparisons, no array literal: this runs once per heap level on
      // every heartbeat (§5), so it must not allocate.
      let left = 2 * parent + 1
      if left < heap.count && heap[left].fires(before: heap[best]) { best = left }
      if left + 1 < heap.count && heap[left + 1].fires(before: heap[best]) { best = left + 1 }
      guard best != parent else { return }
      heap.swapAt(parent, best)
      parent = best
    }
  }
}
