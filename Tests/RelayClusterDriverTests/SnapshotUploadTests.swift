import RelayClusterDriver
import Testing

struct SnapshotUploadTests {
  /// Every step of an upload that goes well, with the replies that advance it.
  private static func steps(pieces: Int) -> [SnapshotUpload.Step] {
    var upload = SnapshotUpload(pieces: pieces)
    var steps = [upload.start(mayStore: true)]
    while true {
      let reply: SnapshotUpload.Reply = steps.last == .swap ? .swapped : .staged
      steps.append(upload.handle(reply, mayStore: true))
      if case .finished = steps.last { return steps }
    }
  }

  @Test func piecesGoOneAtATimeThenTheSwap() {
    #expect(Self.steps(pieces: 3) == [.set, .append(piece: 1), .append(piece: 2), .swap, .finished(.stored)])
    #expect(Self.steps(pieces: 1) == [.set, .swap, .finished(.stored)])
    #expect(Self.steps(pieces: 0) == [.set, .swap, .finished(.stored)], "an empty snapshot is staged too")
  }

  @Test func aRefusedPieceNeverSwaps() {
    var upload = SnapshotUpload(pieces: 3)
    _ = upload.start(mayStore: true)
    #expect(upload.handle(.staged, mayStore: true) == .append(piece: 1))
    #expect(upload.handle(.refused, mayStore: true) == .finished(.failed))
    #expect(upload.awaiting == nil)
    #expect(upload.handle(.staged, mayStore: true) == .finished(.failed), "a late reply after the end starts nothing")
  }

  @Test func aNodeThatMayNoLongerStoreStopsBeforeTheNextCommand() {
    var fresh = SnapshotUpload(pieces: 2)
    #expect(fresh.start(mayStore: false) == .finished(.abandoned))
    var upload = SnapshotUpload(pieces: 2)
    _ = upload.start(mayStore: true)
    _ = upload.handle(.staged, mayStore: true)
    #expect(upload.handle(.staged, mayStore: false) == .finished(.abandoned), "no swap from a node that left")
  }

  @Test func theSwapsAnswersEndIt() {
    for (reply, outcome) in [
      (SnapshotUpload.Reply.swapped, SnapshotUpload.Outcome.stored), (.old, .superseded), (.short, .short),
      (.refused, .failed),
    ] {
      var upload = SnapshotUpload(pieces: 1)
      _ = upload.start(mayStore: true)
      #expect(upload.handle(.staged, mayStore: true) == .swap)
      #expect(upload.handle(reply, mayStore: false) == .finished(outcome), "the swap is atomic: its answer stands")
    }
  }

  @Test func aReplyThatDoesNotFitTheStepFails() {
    var upload = SnapshotUpload(pieces: 2)
    _ = upload.start(mayStore: true)
    #expect(upload.handle(.swapped, mayStore: true) == .finished(.failed))
  }
}
