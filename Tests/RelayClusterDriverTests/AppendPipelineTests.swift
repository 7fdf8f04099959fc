import Testing

import RelayClusterDriver

/// Backpressure marks of a cluster node's appends (AppendPipeline.swift).
@Suite struct AppendPipelineTests {
  @Test func fullAtAHighMarkDrainedBelowBothLowMarks() {
    var p = AppendPipeline(highRecords: 4, lowRecords: 1, highBytes: 1_000, lowBytes: 100)
    for _ in 0..<3 { p.sent(bytes: 10) }
    #expect(!p.isFull)
    p.sent(bytes: 10)
    #expect(p.isFull && p.records == 4)
    let first = p.answered(bytes: 10)  // 3 left: above the low mark, still full
    let second = p.answered(bytes: 10)
    #expect(!first && !second && p.isFull)
    let third = p.answered(bytes: 10)  // 1 left: drained, reported once
    let fourth = p.answered(bytes: 10)
    #expect(third && !fourth && !p.isFull)
  }

  @Test func bytesAloneFillIt() {
    var p = AppendPipeline(highRecords: 100, lowRecords: 10, highBytes: 1_000, lowBytes: 100)
    p.sent(bytes: 600)
    p.sent(bytes: 600)
    #expect(p.isFull)
    let first = p.answered(bytes: 600)  // 600 bytes left: above the low mark
    let second = p.answered(bytes: 600)
    #expect(!first && second)
  }

  @Test func answersBeyondWhatWasSentNeverGoNegative() {
    var p = AppendPipeline()
    let drained = p.answered(bytes: 5)
    #expect(!drained && p.records == 0 && p.bytes == 0)
  }
}
