// ReplayChunks (ReplayChunks.swift): the replay log's storage frees a dropped event's
// payload at once, unless a copy (a snapshot's capture) holds it. Order and copies
// are ChunkedQueue's (ChunkedQueueTests).
import RelayPrimitives
import Testing

@testable import RelayCore

@Suite struct ReplayChunksTests {
  static func event(_ n: Int64, _ payload: Payload = Payload([])) -> RecordedEvent {
    RecordedEvent(atMonoMs: n, body: .payload(payload))
  }

  /// A dropped event's payload is freed when it is dropped, not when its chunk goes;
  /// while a copy holds it, the copy keeps it intact.
  @Test func aDroppedPayloadIsFreedAtOnceUnlessACopyHoldsIt() {
    var chunks = ReplayChunks()
    weak var first: Payload?
    do {
      let payload = Payload(Array(repeating: 1, count: 100))
      first = payload
      chunks.append(Self.event(1, payload))
    }
    for n in Int64(2)...5 { chunks.append(Self.event(n)) }
    var copy: ReplayChunks? = chunks
    chunks.dropFirst()
    #expect(first != nil, "the copy's event lost its payload")
    if case .payload(let p)? = copy?.first?.body { #expect(p.bytes.count == 100) }
    copy = nil
    #expect(first == nil, "the log kept a dropped payload after the copy went")
    var alone = ReplayChunks()
    do {
      let payload = Payload([2, 2])
      first = payload
      alone.append(Self.event(1, payload))
    }
    alone.append(Self.event(2))
    alone.dropFirst()
    #expect(first == nil, "a dropped payload stayed alive with its chunk")
    #expect(alone.count == 1 && chunks.count == 4)
  }
}
