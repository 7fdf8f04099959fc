// §9 finished calls kept for idempotent repeats: bounded in count and bytes.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct FinishedCallsTests {
  /// Callers c1…cN (uids u1…uN) each place one call to bob with `metadataBytes` of
  /// metadata and cancel it at once; returns the call ids in finish order.
  static func finishCalls(_ h: Harness, count: Int, metadataBytes: Int = 10) -> [String] {
    h.connect(100, uid: "bob")
    var ids: [String] = []
    let meta = String(repeating: "m", count: metadataBytes)
    for i in 1...count {
      h.connect(UInt64(i), uid: "u\(i)")
      h.send(UInt64(i), #"{"type":"call.initiate","id":"i","to":["bob"],"callType":"audio","metadata":{"m":"\#(meta)"}}"#)
      let reply = delivered(to: UInt64(i), h.out()).first ?? ""
      let id = (try? JSONParser.parse(reply))?["callId"]?.stringValue ?? "?"
      h.send(UInt64(i), #"{"type":"call.cancel","callId":"\#(id)"}"#)
      _ = h.out()
      ids.append(id)
    }
    return ids
  }

  static func cancelAgain(_ h: Harness, _ id: String, uid: String) -> Int {
    h.core.callAction(.cancel, callId: id, identity: Identity(uid: uid, name: uid), at: h.now).status
  }

  @Test func countBoundForgetsTheOldestFirst() {
    let h = Harness { c in
      c.maxEndedCalls = 3
      withoutHeartbeats(&c)
    }
    let ids = Self.finishCalls(h, count: 5)
    let stats = h.core.callStats
    #expect(stats.held == 3 && stats.finishedHeld == 3 && stats.finishedEvicted == 2)
    #expect(Self.cancelAgain(h, ids[0], uid: "u1") == 404)  // forgotten early
    #expect(Self.cancelAgain(h, ids[4], uid: "u5") == 200)  // still idempotent
  }

  @Test func byteBoundCountsMetadata() {
    let h = Harness { c in
      c.maxEndedCallBytes = 12_000
      withoutHeartbeats(&c)
    }
    _ = Self.finishCalls(h, count: 10, metadataBytes: 3_000)
    let stats = h.core.callStats
    #expect(stats.finishedBytes <= 12_000 && stats.finishedHeld == 3)
    #expect(stats.finishedEvicted == 7)
  }

  /// After retention the account is empty again: nothing is left behind.
  @Test func retentionEmptiesTheAccount() {
    let h = Harness(configure: withoutHeartbeats)
    _ = Self.finishCalls(h, count: 4, metadataBytes: 100)
    #expect(h.core.callStats.finishedHeld == 4 && h.core.callStats.finishedBytes > 400)
    h.advance(CallBook.retentionMs)
    let stats = h.core.callStats
    #expect(stats.held == 0 && stats.finishedHeld == 0 && stats.finishedBytes == 0 && stats.finishedEvicted == 0)
  }
}
