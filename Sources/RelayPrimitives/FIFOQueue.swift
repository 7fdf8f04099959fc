// A first-in first-out queue over one array, read from a head index: append and
// pop are O(1) amortized with no per-element allocation, and the elements stay
// contiguous (a slice of the live ones costs nothing). The dead prefix is dropped
// by one rule (`compactIfWorthIt`), so its memory is bounded by the live part.
// EventLoop's RingBuffer stays its own type: a socket's write queue needs stable
// element addresses (a partly written buffer is advanced in place through a
// pointer) and must never be copied, which an array-backed value cannot promise;
// pure code, which may not use unsafe pointers, gets this one.

/// FIFO over an array and a head index.
///
/// A popped element stays in the dead prefix until the next compaction; an owner
/// whose elements hold large buffers overwrites the first element before popping it
/// (`self[0] = …`), as the replay log does.
public struct FIFOQueue<Element> {
  @usableFromInline var storage: [Element]
  @usableFromInline var head = 0
  /// Capacity kept however empty the queue gets (see `shrinkIfSparse`).
  @usableFromInline let retainedCapacity: Int

  /// The dead prefix is dropped once it is at least this long and at least half of
  /// the storage: each live element is moved at most once per halving, so appends
  /// stay O(1) amortized, and short queues are never shuffled.
  public static var compactionThreshold: Int { 64 }
  /// Arrays never give capacity back on their own: after a burst the queue would
  /// keep its peak size for the life of the process. Above `retainedCapacity`
  /// (elements; this by default), a queue that is a quarter full is reallocated
  /// half full.
  public static var defaultRetainedCapacity: Int { 1_024 }

  /// An empty queue that keeps up to `retainedCapacity` elements' storage when it
  /// empties (a byte buffer refilled by every read keeps more).
  @inlinable public init(retainedCapacity: Int = defaultRetainedCapacity) {
    storage = []
    self.retainedCapacity = retainedCapacity
  }

  /// A queue holding `elements`, first to last.
  @inlinable public init<S: Sequence>(_ elements: S) where S.Element == Element {
    storage = Array(elements)
    retainedCapacity = Self.defaultRetainedCapacity
  }

  /// Elements queued.
  @inlinable public var count: Int { storage.count - head }
  @inlinable public var isEmpty: Bool { head == storage.count }
  /// The oldest element.
  @inlinable public var first: Element? { head < storage.count ? storage[head] : nil }
  /// The newest element.
  @inlinable public var last: Element? { head < storage.count ? storage[storage.count - 1] : nil }
  /// The live elements, oldest first.
  @inlinable public var elements: ArraySlice<Element> { storage[head...] }
  /// Capacity of the storage, dead prefix included (for tests of the shrink rule).
  public var storageCapacity: Int { storage.capacity }
  /// Slots of the dead prefix (for tests of the compaction rule).
  public var deadPrefix: Int { head }

  /// The element `offset` places after the oldest, modified in place (an element
  /// holding an array is not copied to append to it).
  @inlinable public subscript(offset: Int) -> Element {
    get { storage[head + offset] }
    _modify { yield &storage[head + offset] }
  }

  /// Inserts `element` `offset` places after the oldest (O(count - offset)).
  @inlinable public mutating func insert(_ element: Element, at offset: Int) {
    precondition(offset >= 0 && offset <= count, "FIFOQueue.insert: offset out of range")
    storage.insert(element, at: head + offset)
  }

  @inlinable public mutating func append(_ element: Element) { storage.append(element) }

  @inlinable public mutating func append<S: Sequence>(contentsOf elements: S) where S.Element == Element {
    storage.append(contentsOf: elements)
  }

  /// Removes and returns the oldest element.
  @inlinable @discardableResult
  public mutating func popFirst() -> Element? {
    guard head < storage.count else { return nil }
    let element = storage[head]
    head += 1
    compactIfWorthIt()
    return element
  }

  /// Removes the `n` oldest elements.
  @inlinable public mutating func removeFirst(_ n: Int) {
    precondition(n >= 0 && n <= count, "FIFOQueue.removeFirst: more than the queue holds")
    head += n
    compactIfWorthIt()
  }

  /// Empties the queue.
  @inlinable public mutating func removeAll(keepingCapacity: Bool = true) {
    storage.removeAll(keepingCapacity: keepingCapacity)
    head = 0
    shrinkIfSparse()
  }

  /// The one compaction rule of every queue in the relay.
  @inlinable mutating func compactIfWorthIt() {
    if head == storage.count {
      storage.removeAll(keepingCapacity: true)
      head = 0
      shrinkIfSparse()
    } else if head >= Self.compactionThreshold && head * 2 >= storage.count {
      storage.removeFirst(head)
      head = 0
      shrinkIfSparse()
    }
  }

  @usableFromInline mutating func shrinkIfSparse() {
    guard storage.capacity > retainedCapacity, (storage.count - head) * 4 < storage.capacity else { return }
    var smaller: [Element] = []
    smaller.reserveCapacity(storage.count * 2)
    smaller.append(contentsOf: storage[head...])
    storage = smaller
    head = 0
  }
}

extension FIFOQueue: Sendable where Element: Sendable {}
