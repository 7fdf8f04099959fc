import RelayCore
import Testing

@testable import RelayCluster

@Suite struct DataFileTests {
  let seed = [UInt8](repeating: 7, count: 32)

  func header(_ kind: DataFileHeader.Kind = .log, rules: UInt32 = 5) -> DataFileHeader {
    DataFileHeader(kind: kind, rules: rules, seed: seed)
  }

  func record(_ p: UInt64, _ text: String = "x") -> [UInt8] {
    let batch = LogBatch(node: 1, inputs: [.text(connection: 1 << 40 | 1, Array(text.utf8))]).encoded()
    return DataFrame.record(position: p, timeMs: 1_000 + Int64(p), batch: batch)
  }

  func file(_ records: ClosedRange<UInt64>) -> [UInt8] {
    records.reduce(header().encoded()) { $0 + record($1) }
  }

  @Test func headerRoundTripsAndNamesAForeignVersion() {
    let bytes = header().encoded()
    #expect(bytes.count == DataFileHeader.byteCount)
    #expect(DataFileHeader.check(bytes, kind: .log, expected: header()) == .valid(header()))
    #expect(DataFileHeader.check(bytes, kind: .snapshot, expected: header(.snapshot)) == .damaged)
    guard case .foreign(let other) = DataFileHeader.check(bytes, kind: .log, expected: header(rules: 6)) else {
      Issue.record("another rules version must read as foreign")
      return
    }
    #expect(other.rules == 5 && other.versionText.contains("rules 5"))
    #expect(DataFileHeader.check(Array(bytes.prefix(20)), kind: .log, expected: header()) == .short)
    for i in 0..<bytes.count {
      var flipped = bytes
      flipped[i] ^= 0x01
      #expect(DataFileHeader.check(flipped, kind: .log, expected: header()) == .damaged, "byte \(i)")
    }
  }

  /// The durable node frames each record in place in its turn's buffer: the bytes
  /// are exactly those of `record(position:timeMs:batch: batch.encoded())`, and the
  /// range it returns is the encoded batch; reading them back gives the same numbers.
  @Test func framesWrittenInPlaceAreTheFramesOfEncodedBatches() {
    let join = JoinRequest(name: "standalone", nonce: 9, rules: ClusterRules(rules: 3, configDigest: [1, 2, 3]))
    let batches = [
      LogBatch(node: 1, inputs: [.text(connection: 1 << 40 | 1, Array(#"{"type":"hello"}"#.utf8))]),
      LogBatch(node: 0, inputs: [.join(join)]),
      LogBatch(node: 2, inputs: [.open(connection: 5), .closed(connection: 5, clean: true), .beat, .tick, .leave]),
      LogBatch(node: 2, inputs: [.admin(request: 4, .removeParticipant(session: "s", uid: "u")), .text(connection: 5, [])]),
    ]
    var w = BinaryWriter()
    w.u8(0xAB)  // a frame already in the buffer
    var expected: [UInt8] = [0xAB]
    for (i, batch) in batches.enumerated() {
      let p = UInt64(i + 1)
      let range = DataFrame.appendRecord(position: p, timeMs: 1_000 + Int64(i), batch: batch, to: &w)
      expected += DataFrame.record(position: p, timeMs: 1_000 + Int64(i), batch: batch.encoded())
      #expect(w.bytes == expected)
      #expect(Array(w.bytes[range]) == batch.encoded())
    }
    var reader = DataFileReader(header().encoded() + Array(w.bytes.dropFirst()))
    var count = 0
    while let frame = reader.nextRecordFrame() {
      #expect(frame.position == UInt64(count + 1) && frame.timeMs == 1_000 + Int64(count))
      #expect(Array(reader.bytes[frame.batch]) == batches[count].encoded())
      count += 1
    }
    #expect(count == batches.count && reader.damage == nil)
  }

  /// Only a batch of exactly one message within the limit is read in place; the rest
  /// goes to the decoder.
  @Test func onlyOneMessageWithinTheLimitIsReadInPlace() {
    let limits = LogLimits(maxTextBytes: 4)
    func single(_ batch: LogBatch) -> (node: UInt32, connection: UInt64, text: [UInt8])? {
      batch.encoded().withUnsafeBytes { b in LogBatch.singleText(b, limits: limits).map { ($0.node, $0.connection, Array($0.text)) } }
    }
    let one = single(LogBatch(node: 3, inputs: [.text(connection: 9, [1, 2, 3, 4])]))
    #expect(one?.node == 3 && one?.connection == 9 && one?.text == [1, 2, 3, 4])
    #expect(single(LogBatch(node: 3, inputs: [.text(connection: 9, [1, 2, 3, 4, 5])])) == nil)
    #expect(single(LogBatch(node: 3, inputs: [.text(connection: 9, [1]), .beat])) == nil)
    #expect(single(LogBatch(node: 3, inputs: [.open(connection: 9)])) == nil)
    for batch in [LogBatch(node: 1, inputs: [.text(connection: 1, [1, 2, 3, 4]), .closed(connection: 1, clean: false)])] {
      #expect(LogBatch(decoding: batch.encoded(), limits: limits) == batch)
    }
  }

  @Test func readsEveryRecordBackInOrder() {
    var reader = DataFileReader(file(1...3))
    var positions: [String] = []
    while let raw = reader.nextRecord() {
      positions.append(String(decoding: raw.position ?? [], as: UTF8.self))
      #expect(raw.timeMs.map { String(decoding: $0, as: UTF8.self) } == String(1_000 + Int(positions.count)))
      #expect(raw.batch.flatMap { LogBatch(decoding: $0, limits: LogLimits(maxTextBytes: 100)) } != nil)
    }
    #expect(positions == ["1", "2", "3"])
    #expect(reader.damage == nil)
  }

  /// Every cut of the last frame is a torn tail at the end of the record before it.
  @Test func aCutLastFrameIsATornTail() {
    let whole = file(1...3)
    let goodEnd = file(1...2).count
    for cut in goodEnd + 1..<whole.count {
      var reader = DataFileReader(Array(whole.prefix(cut)))
      var count = 0
      while reader.nextRecord() != nil { count += 1 }
      #expect(count == 2, "cut at \(cut)")
      #expect(reader.damage == .tornTail(offset: goodEnd), "cut at \(cut)")
    }
  }

  /// A flipped bit anywhere in a frame followed by others is damage at that frame; in
  /// the last frame's payload, a torn tail (a crash can leave exactly that).
  @Test func aFlippedByteIsFoundWhereItIs() {
    let whole = file(1...3)
    let second = file(1...1).count
    let third = file(1...2).count
    for i in second..<third {
      var bytes = whole
      bytes[i] ^= 0x10
      var reader = DataFileReader(bytes)
      var count = 0
      while reader.nextRecord() != nil { count += 1 }
      #expect(count == 1, "byte \(i)")
      #expect(reader.damage?.offset == second, "byte \(i)")
    }
    var last = whole
    last[whole.count - 1] ^= 0x10
    var reader = DataFileReader(last)
    while reader.nextRecord() != nil {}
    #expect(reader.damage == .tornTail(offset: third))
  }

  @Test func aFrameTooShortForARecordIsDamage() {
    var reader = DataFileReader(header().encoded() + DataFrame.encode([1, 2, 3]) + record(2))
    #expect(reader.nextRecord() == nil)
    #expect(reader.damage == .corrupt(offset: DataFileHeader.byteCount))
  }
}

@Suite struct DataDirLayoutTests {
  @Test func namesRoundTripAndSortAsNumbers() {
    #expect(DataDirFile.snapshot(position: 42).name == "snapshot-00000000000000000042.snap")
    #expect(DataDirFile(name: "log-00000000000000000007.log") == .log(start: 7))
    #expect(DataDirFile(name: "log-00000000000000000000.log") == .other)
    #expect(DataDirFile(name: "snapshot-12.snap") == .other)
    #expect(DataDirFile(name: "snapshot-00000000000000000042.snap.tmp") == .temporary)
    #expect(DataDirFile(name: "log-00000000000000000007.log.damaged") == .other)
    #expect(DataDirFile(name: "relay.lock") == .other)
    let layout = DataDirLayout(names: ["log-00000000000000000010.log", "log-00000000000000000002.log", "relay.lock"])
    #expect(layout.segments == [2, 10])
  }

  func layout(snapshots: [UInt64], segments: [UInt64]) -> DataDirLayout {
    DataDirLayout(
      names: snapshots.map { DataDirFile.snapshot(position: $0).name } + segments.map { DataDirFile.log(start: $0).name })
  }

  @Test func aRestartReadsTheNewestSnapshotThenTheSegmentsAfterIt() {
    let dir = layout(snapshots: [100, 200], segments: [101, 201, 250])
    #expect(dir.startCandidates == [200, 100, 0])
    #expect(dir.segments(after: 200) == [201, 250])
    #expect(dir.segments(after: 100) == [101, 201, 250])
    #expect(dir.segments(after: 230) == [201, 250])
    #expect(layout(snapshots: [], segments: [1, 40]).segments(after: 0) == [1, 40])
  }

  /// After each snapshot the dir keeps two snapshots and what the older does not
  /// cover, so an unreadable newest one still leaves the whole state.
  @Test func keepsTheFallbackSnapshotAndWhatItDoesNotCover() {
    #expect(layout(snapshots: [100], segments: [1, 101]).obsolete(afterSnapshot: 100) == ([], []))
    let dir = layout(snapshots: [100, 200, 300], segments: [1, 101, 201, 301])
    let old = dir.obsolete(afterSnapshot: 300)
    #expect(old.snapshots == [100])
    #expect(old.segments == [1, 101])
    let kept = layout(snapshots: [200, 300], segments: [201, 301])
    #expect(kept.startCandidates.dropLast().allSatisfy { s in kept.segments(after: s).first.map { $0 <= s + 1 } ?? false })
  }
}
