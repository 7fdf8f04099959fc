// A replay log's events in fixed-size chunks (docs/cluster.md, "Bounded history"). A
// snapshot must capture every session's kept events while the log keeps changing, and
// on the event loop it may only cost the state's skeleton, not its history. Copying
// this value is O(1) — two array references — and what the log does next copies
// only what it touches: appending copies the partly filled tail chunk (at most
// `chunkSize` events), dropping the oldest event copies the chunk list (one
// reference per chunk) and the first chunk. Full chunks in the middle are shared with
// the copy, never copied, so a capture costs the log at most a couple of chunks
// however long it is, and the copy can be read on another thread.

import RelayPrimitives

/// One kept event. Its seq is not stored: seqs in the log are consecutive (every
/// session event is recorded), so it follows from the position.
struct RecordedEvent: Sendable {
  let atMonoMs: Int64
  let body: RecordedBody
}

/// Events oldest first, in chunks of `chunkSize`: every chunk but the last is full.
struct ReplayChunks: Sendable {
  /// Events per chunk: small enough that copying one after a capture is cheap, large
  /// enough that the chunk list stays short (a 1 000-event log has 32).
  static let chunkSize = 32

  /// Full chunks, oldest first.
  private var full = FIFOQueue<[RecordedEvent]>()
  /// The newest events, fewer than `chunkSize`.
  private var tail: [RecordedEvent] = []
  /// Events already dropped from the front of the first chunk (`full.first`, or
  /// `tail` while there is no full chunk).
  private var front = 0

  /// Takes the place of a dropped event's payload, so its bytes are freed at once
  /// rather than when its whole chunk goes.
  private static let dropped = RecordedEvent(atMonoMs: 0, body: .payload(Payload([])))

  var count: Int { full.count * Self.chunkSize + tail.count - front }
  var isEmpty: Bool { count == 0 }

  /// The event `i` places after the oldest.
  subscript(i: Int) -> RecordedEvent {
    precondition(i >= 0 && i < count, "replay event index out of range")
    let at = front + i
    let chunk = at / Self.chunkSize
    if chunk < full.count { return full[chunk][at % Self.chunkSize] }
    return tail[at - full.count * Self.chunkSize]
  }

  var first: RecordedEvent? { isEmpty ? nil : self[0] }

  mutating func append(_ event: RecordedEvent) {
    tail.append(event)
    guard tail.count == Self.chunkSize else { return }
    full.append(tail)
    // A log that filled one chunk is busy: give the next its full size at once.
    tail = []
    tail.reserveCapacity(Self.chunkSize)
  }

  /// Drops the oldest event (the log is not empty).
  mutating func dropFirst() {
    precondition(!isEmpty, "dropping from an empty replay log")
    if full.isEmpty {
      tail[front] = Self.dropped
      front += 1
      if front == tail.count {
        tail.removeAll(keepingCapacity: true)
        front = 0
      }
      return
    }
    full[0][front] = Self.dropped
    front += 1
    guard front == Self.chunkSize else { return }
    // The popped chunk would stay in the queue's dead prefix until compaction.
    full[0] = []
    full.popFirst()
    front = 0
  }

  mutating func removeAll() {
    full.removeAll(keepingCapacity: false)
    tail = []
    front = 0
  }

  /// Every event, oldest first, visited in place.
  func forEach(_ body: (RecordedEvent) -> Void) {
    var skip = front
    for chunk in full.elements {
      for event in chunk[skip...] { body(event) }
      skip = 0
    }
    for event in tail[skip...] { body(event) }
  }
}

/// A replay log as a snapshot captured it (`ReplayLog.captured`).
struct ReplayCapture: Sendable {
  let oldestSeq: Int64?
  let events: ReplayChunks
  /// What the events cost (`ReplayLog.bytes`): at least their encoded size.
  let bytes: Int
  /// The log's name in the budget's eviction order.
  let serial: UInt64
}
