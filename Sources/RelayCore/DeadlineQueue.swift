// One structure for every timer of every connection, session and call (DESIGN.md,
// "The hot path": idle connections cost no per-tick work). Two lanes share one
// scheduling counter, so together they fire in exactly (time, scheduling order):
// - a binary min-heap keyed by monotonic ms for grace, idle and call timers;
// - a FIFO for §1 hello timeouts: upgrade time + a fixed timeout arrive in time order,
//   so they need no heap, and an entry is 24 bytes instead of a heap entry's 40.
// §5 heartbeat checks, the one timer every socket always has, are not here: they are
// node-local, in the shell's wheel (RelayPrimitives `Heartbeats`).

import RelayPrimitives

/// What a deadline is for. Entries are never removed when they become moot; the core
/// checks on firing whether the state they refer to still wants them ("lazy
/// cancellation"), which keeps scheduling cheap and cancellation free.
enum DeadlineKind: Equatable {
  /// §1: `hello` not received within `helloTimeoutMs` of the upgrade.
  case hello(ConnectionID)
  /// §5 grace, idle countdowns (Liveness.swift).
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

/// Min-heap of deadlines plus the hello FIFO.
struct DeadlineQueue {
  private(set) var heap: [Deadline] = []
  private var nextOrder: UInt64 = 0
  private var hellos = DeadlineLane<HelloTimeout>()

  var isEmpty: Bool { count == 0 }
  /// Queued entries of all lanes, moot ones not yet discarded included.
  var count: Int { heap.count + hellos.count }

  private enum Lane { case heap, hellos }

  /// The lane holding the earliest deadline (compares keys only: no copies).
  private var firstLane: (lane: Lane, atMonoMs: Int64)? {
    var best: (lane: Lane, atMonoMs: Int64, order: UInt64)?
    func consider(_ lane: Lane, _ key: (atMonoMs: Int64, order: UInt64)?) {
      guard let key else { return }
      if let b = best, b.atMonoMs != key.atMonoMs ? b.atMonoMs < key.atMonoMs : b.order < key.order { return }
      best = (lane, key.atMonoMs, key.order)
    }
    consider(.heap, heap.isEmpty ? nil : (heap[0].atMonoMs, heap[0].order))
    consider(.hellos, hellos.firstKey)
    return best.map { ($0.lane, $0.atMonoMs) }
  }

  /// The earliest deadline of any lane.
  var first: Deadline? {
    switch firstLane?.lane {
    case nil: return nil
    case .heap: return heap.first
    case .hellos: return hellos.firstDeadline
    }
  }

  init() {}

  /// Every queued entry of every lane, moot ones included, in no particular order:
  /// what a snapshot filters and sorts (SnapshotEncode.swift).
  var pending: [Deadline] { heap + hellos.pendingDeadlines }

  /// The scheduling counter: the order number the next deadline gets.
  var nextOrderNumber: UInt64 { nextOrder }

  /// A queue holding `entries` (sorted by `fires(before:)`, order numbers below
  /// `nextOrder`) with their own order numbers: the deadlines of a snapshot. Each goes
  /// to the lane it would have been scheduled in; the lanes fire together in (time,
  /// order), so which lane holds an entry never changes when it fires.
  init(restoring entries: [Deadline], nextOrder: UInt64) {
    for deadline in entries {
      switch deadline.kind {
      case .hello(let c) where hellos.accepts(deadline.atMonoMs):
        hellos.add(HelloTimeout(order: deadline.order, connection: c), dueMs: deadline.atMonoMs)
      default:
        heap.append(deadline)
        siftUp(heap.count - 1)
      }
    }
    self.nextOrder = nextOrder
  }

  mutating func schedule(at monoMs: Int64, _ kind: DeadlineKind) {
    heap.append(Deadline(atMonoMs: monoMs, order: nextOrder, kind: kind))
    nextOrder += 1
    siftUp(heap.count - 1)
  }

  /// §1 hello timeout of `c`. In the FIFO when not earlier than the last one there
  /// (always, with a monotonic clock and one timeout); otherwise in the heap.
  mutating func scheduleHello(at monoMs: Int64, _ c: ConnectionID) {
    guard hellos.accepts(monoMs) else { return schedule(at: monoMs, .hello(c)) }
    hellos.add(HelloTimeout(order: nextOrder, connection: c), dueMs: monoMs)
    nextOrder += 1
  }

  /// Removes and returns the earliest deadline if it is due at `nowMonoMs`.
  mutating func popDue(_ nowMonoMs: Int64) -> Deadline? {
    guard let (_, at) = firstLane, at <= nowMonoMs else { return nil }
    return popFirst()
  }

  @discardableResult
  mutating func popFirst() -> Deadline? {
    switch firstLane?.lane {
    case nil: return nil
    case .hellos: return hellos.popFirstDeadline()
    case .heap:
      heap.swapAt(0, heap.count - 1)
      let top = heap.removeLast()
      if !heap.isEmpty { siftDown(0) }
      if !heap.isEmpty, let broken = Self.violation(popped: (top.atMonoMs, top.order), next: (heap[0].atMonoMs, heap[0].order)) {
        fatalError(broken)
      }
      shrinkIfSparse(&heap)
      return top
    }
  }

  /// The heap's invariant at a pop, by name: what was queued behind the popped
  /// deadline must not fire before it (O(1): only the new top's key is compared, so
  /// no entry is copied).
  static func violation(popped: (atMonoMs: Int64, order: UInt64), next: (atMonoMs: Int64, order: UInt64)) -> String? {
    let early = next.atMonoMs != popped.atMonoMs ? next.atMonoMs < popped.atMonoMs : next.order < popped.order
    guard early else { return nil }
    return "deadline order: \(next.atMonoMs) ms (#\(next.order)) queued behind \(popped.atMonoMs) ms (#\(popped.order))"
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
      // Two plain comparisons, no array literal: this runs once per heap level, so it
      // must not allocate.
      let left = 2 * parent + 1
      if left < heap.count && heap[left].fires(before: heap[best]) { best = left }
      if left + 1 < heap.count && heap[left + 1].fires(before: heap[best]) { best = left + 1 }
      guard best != parent else { return }
      heap.swapAt(parent, best)
      parent = best
    }
  }
}

/// A §1 hello timeout in its FIFO lane (upgrade time + one fixed timeout arrive in
/// time order): its scheduling order and connection, 24 bytes with the time.
struct HelloTimeout {
  let order: UInt64
  let connection: ConnectionID
}

extension DeadlineLane where Value == HelloTimeout {
  /// The timeouts not yet fired, as deadlines (for snapshots).
  var pendingDeadlines: [Deadline] {
    pending.map { Deadline(atMonoMs: $0.dueMs, order: $0.value.order, kind: .hello($0.value.connection)) }
  }

  var firstKey: (atMonoMs: Int64, order: UInt64)? { first.map { ($0.dueMs, $0.value.order) } }

  var firstDeadline: Deadline? {
    first.map { Deadline(atMonoMs: $0.dueMs, order: $0.value.order, kind: .hello($0.value.connection)) }
  }

  mutating func popFirstDeadline() -> Deadline? {
    popFirst().map { Deadline(atMonoMs: $0.dueMs, order: $0.value.order, kind: .hello($0.value.connection)) }
  }
}

/// Arrays never give capacity back on their own: after a burst (a reconnect storm
/// opens thousands of connections at once) the queue would keep its peak size for
/// the life of the process. Reallocates at a quarter full, to half full.
func shrinkIfSparse<T>(_ array: inout [T]) {
  guard array.capacity > 1_024, array.count * 4 < array.capacity else { return }
  var smaller: [T] = []
  smaller.reserveCapacity(array.count * 2)
  smaller.append(contentsOf: array)
  array = smaller
}
