/// A growable FIFO ring with stable element addresses between mutations, used for
/// per-connection write queues and the loop's linger queue. A class (not a
/// copy-on-write struct) because it is owned by exactly one loop-bound object and
/// must never be copied on the hot path; capacity is a power of two so indexing is
/// a mask, and it grows by doubling, so appends are amortised O(1) with no
/// allocation once the queue has reached its working size.
final class RingBuffer<Element> {
  private var storage: UnsafeMutablePointer<Element>
  private(set) var capacity: Int
  static var defaultCapacity: Int { 8 }
  private var head = 0
  /// Number of elements queued.
  private(set) var count = 0

  /// `initialCapacity` is rounded up to a power of two (at least 2).
  init(initialCapacity: Int = defaultCapacity) {
    var size = 2
    while size < initialCapacity { size <<= 1 }
    self.capacity = size
    self.storage = .allocate(capacity: size)
  }

  deinit {
    removeAll()
    storage.deallocate()
  }

  var isEmpty: Bool { count == 0 }

  /// Address of the element `index` positions after the front. Valid until the next
  /// append or removal; used to read or advance an element in place without a copy.
  func pointer(at index: Int) -> UnsafeMutablePointer<Element> {
    precondition(index >= 0 && index < count, "RingBuffer index out of range")
    return storage + ((head + index) & (capacity - 1))
  }

  /// The front element's address (the queue must not be empty).
  var front: UnsafeMutablePointer<Element> { pointer(at: 0) }

  func append(_ element: Element) {
    if count == capacity { grow() }
    (storage + ((head + count) & (capacity - 1))).initialize(to: element)
    count += 1
  }

  @discardableResult
  func removeFirst() -> Element {
    precondition(count > 0, "removeFirst on an empty RingBuffer")
    let element = (storage + head).move()
    head = (head + 1) & (capacity - 1)
    count -= 1
    return element
  }

  /// Removes (and releases) the first `n` elements.
  func removeFirst(_ n: Int) {
    precondition(n <= count, "RingBuffer.removeFirst(n) beyond count")
    for _ in 0..<n { (storage + head).deinitialize(count: 1); head = (head + 1) & (capacity - 1) }
    count -= n
  }

  func removeAll() {
    removeFirst(count)
    head = 0
  }

  private func grow() {
    let newCapacity = capacity * 2
    let newStorage = UnsafeMutablePointer<Element>.allocate(capacity: newCapacity)
    for index in 0..<count {
      (newStorage + index).moveInitialize(from: storage + ((head + index) & (capacity - 1)), count: 1)
    }
    storage.deallocate()
    storage = newStorage
    capacity = newCapacity
    head = 0
  }
}
