// A FIFO in fixed-size chunks, for state a snapshot captures while its owner keeps
// changing it (docs/cluster.md, "Bounded history"): a capture may only cost the loop
// the state's skeleton, not its history. Copying this value is O(1) — two array
// references — and what the owner does next copies only what it touches: appending
// copies the partly filled tail chunk (fewer than `chunkSize` elements), popping the
// oldest element copies the chunk list (one reference per chunk) and, when the slot
// is overwritten, the first chunk. Full chunks in the middle are shared with the copy,
// never copied, so a capture costs the owner at most a couple of chunks however long
// the queue is, and the copy can be read on another thread. A chunk size near the
// square root of the expected length keeps both copies small.

/// Elements oldest first, in chunks of `chunkSize`: every chunk but the last is full.
public struct ChunkedQueue<Element> {
  /// Elements per chunk.
  public let chunkSize: Int
  /// Full chunks, oldest first.
  @usableFromInline var full = FIFOQueue<[Element]>()
  /// The newest elements, fewer than `chunkSize`.
  @usableFromInline var tail: [Element] = []
  /// Elements already popped from the front of the first chunk (`full.first`, or
  /// `tail` while there is no full chunk).
  @usableFromInline var front = 0

  @inlinable public init(chunkSize: Int) {
    precondition(chunkSize > 0, "ChunkedQueue: chunks must hold at least one element")
    self.chunkSize = chunkSize
  }

  /// A queue holding `elements`, first to last.
  @inlinable public init<S: Sequence>(chunkSize: Int, _ elements: S) where S.Element == Element {
    self.init(chunkSize: chunkSize)
    for element in elements { append(element) }
  }

  @inlinable public var count: Int { full.count * chunkSize + tail.count - front }
  @inlinable public var isEmpty: Bool { count == 0 }

  /// The element `i` places after the oldest.
  @inlinable public subscript(i: Int) -> Element {
    precondition(i >= 0 && i < count, "ChunkedQueue index out of range")
    let at = front + i
    let chunk = at / chunkSize
    if chunk < full.count { return full[chunk][at % chunkSize] }
    return tail[at - full.count * chunkSize]
  }

  @inlinable public var first: Element? { isEmpty ? nil : self[0] }

  @inlinable public mutating func append(_ element: Element) {
    tail.append(element)
    guard tail.count == chunkSize else { return }
    full.append(tail)
    // A queue that filled one chunk is busy: give the next its full size at once.
    tail = []
    tail.reserveCapacity(chunkSize)
  }

  /// Removes and returns the oldest element. `filler`, when given, takes its slot
  /// until the whole chunk goes, so what the element holds is freed at once (unless
  /// a copy still holds it).
  @inlinable @discardableResult
  public mutating func popFirst(leaving filler: Element? = nil) -> Element? {
    guard !isEmpty else { return nil }
    if full.isEmpty {
      let element = tail[front]
      if let filler { tail[front] = filler }
      front += 1
      if front == tail.count {
        tail.removeAll(keepingCapacity: true)
        front = 0
      }
      return element
    }
    let element = full[0][front]
    front += 1
    guard front == chunkSize else {
      if let filler { full[0][front - 1] = filler }
      return element
    }
    // The popped chunk would stay in the chunk list's dead prefix until compaction.
    full[0] = []
    full.popFirst()
    front = 0
    return element
  }

  @inlinable public mutating func removeAll() {
    full.removeAll(keepingCapacity: false)
    tail = []
    front = 0
  }

  /// Every element, oldest first, visited in place.
  @inlinable public func forEach(_ body: (Element) throws -> Void) rethrows {
    var skip = front
    for chunk in full.elements {
      for element in chunk[skip...] { try body(element) }
      skip = 0
    }
    for element in tail[skip...] { try body(element) }
  }
}

extension ChunkedQueue: Sendable where Element: Sendable {}
