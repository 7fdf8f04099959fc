// Deadlines that arrive in time order (one constant timeout after an event whose
// clock is monotonic: request-head, close-handshake and hello timeouts) need no
// heap: a FIFO is already sorted, so adding and firing are O(1). Entries are
// checked lazily by their owners: one whose subject moved on is skipped when due.

/// A FIFO of deadlines added in non-decreasing time order.
public struct DeadlineLane<Value> {
  /// One deadline and what it is for.
  public struct Entry {
    public let dueMs: Int64
    public let value: Value

    @inlinable public init(dueMs: Int64, value: Value) {
      self.dueMs = dueMs
      self.value = value
    }
  }

  @usableFromInline var entries = FIFOQueue<Entry>()

  @inlinable public init() {}

  /// Deadlines queued.
  @inlinable public var count: Int { entries.count }
  @inlinable public var isEmpty: Bool { entries.isEmpty }
  /// The earliest deadline.
  @inlinable public var first: Entry? { entries.first }
  @inlinable public var nextDueMs: Int64? { entries.first?.dueMs }
  /// The deadlines not yet fired, earliest first.
  @inlinable public var pending: ArraySlice<Entry> { entries.elements }

  /// Whether a deadline at `dueMs` may be added (not earlier than the last one).
  @inlinable public func accepts(_ dueMs: Int64) -> Bool { entries.last.map { $0.dueMs <= dueMs } ?? true }

  /// The invariant `add` checks, by name: nil when a deadline at `dueMs` may follow
  /// one at `lastDueMs`.
  @inlinable
  public static func violation(adding dueMs: Int64, after lastDueMs: Int64?) -> String? {
    guard let lastDueMs, dueMs < lastDueMs else { return nil }
    return "deadline lane order: a deadline at \(dueMs) ms added after one at \(lastDueMs) ms"
  }

  /// Adds a deadline; it must not be earlier than the last one (`accepts`).
  ///
  /// A broken invariant is a bug: it traps in release builds too, with its name
  /// (`fatalError`, because `precondition` drops its message under -O).
  @inlinable
  public mutating func add(_ value: Value, dueMs: Int64) {
    if let broken = Self.violation(adding: dueMs, after: entries.last?.dueMs) { fatalError(broken) }
    entries.append(Entry(dueMs: dueMs, value: value))
  }

  /// Removes and returns the earliest deadline.
  @inlinable @discardableResult
  public mutating func popFirst() -> Entry? { entries.popFirst() }

  /// Removes and returns the values of every deadline at or before `nowMs`.
  @inlinable
  public mutating func popDue(nowMs: Int64) -> [Value] {
    var due: [Value] = []
    while let entry = entries.first, entry.dueMs <= nowMs {
      due.append(entry.value)
      entries.popFirst()
    }
    return due
  }
}

extension DeadlineLane: Sendable where Value: Sendable {}
extension DeadlineLane.Entry: Sendable where Value: Sendable {}
