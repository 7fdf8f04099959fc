// A stream entry as read back from Redis (docs/cluster.md, "The log"): its id and the
// three fields the append script writes. Everything in it is untrusted until the
// replica has checked it (Replica.swift).

/// One stream entry of the log, undecoded.
public struct RawRecord: Sendable {
  /// The stream id (`1700000000000-0`): where the entry is, for reading on and for
  /// logs. Its time part is not used: an entry XADDed by hand with an id in the
  /// future would freeze ids, so the log's clock comes from `t` instead.
  public var id: String
  /// `e`: the encoded `LogBatch`.
  public var batch: [UInt8]?
  /// `n`: the position counted by the append script, decimal.
  public var position: [UInt8]?
  /// `t`: Redis's `TIME` at the append, Unix ms, decimal.
  public var timeMs: [UInt8]?

  public init(id: String, batch: [UInt8]?, position: [UInt8]?, timeMs: [UInt8]?) {
    self.id = id
    self.batch = batch
    self.position = position
    self.timeMs = timeMs
  }

  /// From the field list of an `XREAD`/`XRANGE` entry (`[name, value, …]`); unknown
  /// fields are ignored, a repeated one keeps its last value.
  public init(id: String, fields: [[UInt8]?]) {
    self.init(id: id, batch: nil, position: nil, timeMs: nil)
    var k = 0
    while k + 1 < fields.count {
      switch fields[k] {
      case [UInt8(ascii: "e")]?: batch = fields[k + 1]
      case [UInt8(ascii: "n")]?: position = fields[k + 1]
      case [UInt8(ascii: "t")]?: timeMs = fields[k + 1]
      default: break
      }
      k += 2
    }
  }
}

enum Decimal {
  /// A non-negative decimal of at most 19 digits (no sign, no spaces), or nil.
  static func parse(_ bytes: [UInt8]?) -> UInt64? {
    guard let bytes, !bytes.isEmpty, bytes.count <= 19 else { return nil }
    var v: UInt64 = 0
    for b in bytes {
      guard b >= UInt8(ascii: "0"), b <= UInt8(ascii: "9") else { return nil }
      v = v * 10 + UInt64(b - UInt8(ascii: "0"))  // 19 digits cannot overflow UInt64
    }
    return v
  }
}
