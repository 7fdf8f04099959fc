// The durable node's own records (RelayServer/DiskLog.swift): a socket's message is
// encoded from the read buffer straight into the turn's buffer
// (`DataFrame.appendTextRecord`) and the replica applies it from there, through the
// zero-copy reading of a one-message batch (`LogBatch.singleText`). Both must agree
// with the general encoder and decoder byte for byte, for any bytes.
import RelayCore
import RelayPrimitives
import Testing

@testable import RelayCluster

/// Applies a record as the durable node applies its own: the frame written into a turn
/// buffer that holds other bytes before it (a message by `appendTextRecord`, from a borrowed
/// buffer), applied where it lies. Expects the frame's batch to be `bytes` exactly.
func applyAsOwnRecord(_ replica: Replica, _ bytes: [UInt8], position: UInt64, timeMs: Int64) -> Applied {
  var turn = BinaryWriter()
  turn.raw([0xEE, 0xEE])
  let range: Range<Int>
  if let b = LogBatch(decoding: bytes, limits: replica.config.limits), b.inputs.count == 1,
    case .text(let c, let text) = b.inputs[0]
  {
    range = text.withUnsafeBytes {
      DataFrame.appendTextRecord(position: position, timeMs: timeMs, node: b.node, connection: c, text: $0, to: &turn)
    }
  } else {
    let start = turn.bytes.count + DataFrame.overhead + 16
    turn.raw(DataFrame.record(position: position, timeMs: timeMs, batch: bytes))
    range = start..<turn.bytes.count
  }
  #expect(Array(turn.bytes[range]) == bytes, "the own frame holds the record's bytes")
  return turn.bytes.withUnsafeBytes {
    replica.apply(batch: UnsafeRawBufferPointer(rebasing: $0[range]), position: position, timeMs: timeMs)
  }
}

@Suite struct OwnRecordTests {
  let limits = LogLimits(maxTextBytes: 64)

  @Test func aMessagesFrameIsTheFrameOfItsBatch() {
    for text in [[], Array("{\"type\":\"hello\"}".utf8), [UInt8](repeating: 0xFF, count: 300)] {
      var w = BinaryWriter()
      w.raw([1, 2, 3])
      let range = text.withUnsafeBytes {
        DataFrame.appendTextRecord(position: 1 << 33 | 5, timeMs: 1_800_000_000_123, node: 7, connection: 1 << 40 | 3, text: $0, to: &w)
      }
      let batch = LogBatch(node: 7, inputs: [.text(connection: 1 << 40 | 3, text)]).encoded()
      #expect(Array(w.bytes.dropFirst(3)) == DataFrame.record(position: 1 << 33 | 5, timeMs: 1_800_000_000_123, batch: batch))
      #expect(Array(w.bytes[range]) == batch)
    }
  }

  /// `singleText` reads a batch only when `LogBatch(decoding:)` gives exactly one text
  /// input, and then the same node, connection and bytes: checked over one-message
  /// batches with every kind of damage (lengths, kind, version, trailing bytes, texts
  /// over the limit) and over other batches.
  @Test(arguments: Array(UInt64(1)...UInt64(8)))
  func singleTextAgreesWithTheDecoder(seed: UInt64) {
    var rng = SeededRandom(seed: seed)
    let others: [LogInput] = [.beat, .tick, .open(connection: 9), .closed(connection: 9, clean: true), .leave]
    for _ in 0..<2_000 {
      let text = (0..<rng.below(80)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
      var inputs: [LogInput] = [.text(connection: rng.next(), text)]
      if rng.chance(20) { inputs.append(rng.pick(others)!) }
      if rng.chance(10) { inputs = [rng.pick(others)!] }
      var bytes = LogBatch(node: UInt32(truncatingIfNeeded: rng.next()), inputs: inputs).encoded()
      for _ in 0..<rng.below(3) {
        switch rng.below(4) {
        case 0 where !bytes.isEmpty: bytes[rng.below(bytes.count)] = UInt8(truncatingIfNeeded: rng.next())
        case 1 where !bytes.isEmpty: bytes.removeLast(rng.below(min(bytes.count, 5)) + 1)
        case 2: bytes.append(UInt8(truncatingIfNeeded: rng.next()))
        default: bytes[rng.pick([0, 5, 9, 18].filter { $0 < bytes.count }) ?? 0] ^= 1
        }
      }
      let decoded = LogBatch(decoding: bytes, limits: limits)
      let fast = bytes.withUnsafeBytes { buffer in
        LogBatch.singleText(buffer, limits: limits).map { LogBatch(node: $0.node, inputs: [.text(connection: $0.connection, Array($0.text))]) }
      }
      if let fast {
        #expect(fast == decoded, "seed \(seed): \(bytes)")
      } else if let decoded, decoded.inputs.count == 1, case .text = decoded.inputs[0] {
        Issue.record("seed \(seed): a one-message batch not read in place: \(bytes)")
      }
    }
  }
}
