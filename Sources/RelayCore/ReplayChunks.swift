// A replay log's events in fixed-size chunks (docs/cluster.md, "Bounded history"). A
// snapshot must capture every session's kept events while the log keeps changing, and
// on the event loop it may only cost the state's skeleton, not its history:
// `ChunkedQueue` (RelayPrimitives) shares full chunks with the capture and copies only
// the chunks the log touches next.

import RelayPrimitives

/// One kept event. Its seq is not stored: seqs in the log are consecutive (every
/// session event is recorded), so it follows from the position.
struct RecordedEvent: Sendable {
  let atMonoMs: Int64
  let body: RecordedBody
}

/// A log's events oldest first (the shared chunked FIFO, `ChunkedQueue`).
typealias ReplayChunks = ChunkedQueue<RecordedEvent>

extension ChunkedQueue where Element == RecordedEvent {
  /// Events per chunk: small enough that copying one after a capture is cheap, large
  /// enough that the chunk list stays short (a 1 000-event log has 32).
  static var replayChunkSize: Int { 32 }

  init() { self.init(chunkSize: Self.replayChunkSize) }

  /// Drops the oldest event (the log is not empty), freeing its payload at once
  /// rather than when its whole chunk goes.
  mutating func dropFirst() {
    precondition(!isEmpty, "dropping from an empty replay log")
    popFirst(leaving: droppedEvent)
  }
}

/// Takes the place of a dropped event's payload.
private let droppedEvent = RecordedEvent(atMonoMs: 0, body: .payload(Payload([])))

/// A replay log as a snapshot captured it (`ReplayLog.captured`).
struct ReplayCapture: Sendable {
  let oldestSeq: Int64?
  let events: ReplayChunks
  /// What the events cost (`ReplayLog.bytes`): at least their encoded size.
  let bytes: Int
  /// The log's name in the budget's eviction order.
  let serial: UInt64
}
