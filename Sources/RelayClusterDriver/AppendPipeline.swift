/// Backpressure on a cluster node's appends (contract §12, "At scale"; docs/cluster.md,
/// "Backpressure"): the records sent to Redis and not yet answered, counted and
/// weighed. Past a high mark the node stops reading the sockets that feed its appends
/// (their reads are kept, RelayServer+Turns.swift, and TCP pushes back on the
/// clients); once Redis has answered down to a low mark it reads them again. Two
/// marks, so reading does not flap on and off with every reply.
public struct AppendPipeline: Equatable, Sendable {
  /// A record is cut once it holds this many bytes: its reply cannot come before its
  /// last byte reached Redis, and the liveness rule (ReplyDeadlines.swift) gives each
  /// reply a limit, so a record must cross even a slow link well within it; records
  /// this size also keep the replies, and so these marks, moving.
  public static let recordBytes = 64 << 10
  public var highRecords = 64
  public var lowRecords = 16
  public var highBytes = 512 << 10
  public var lowBytes = 128 << 10
  public private(set) var records = 0
  public private(set) var bytes = 0
  /// Reading is held back until the pipeline drains below both low marks.
  public private(set) var isFull = false

  public init() {}

  public init(highRecords: Int, lowRecords: Int, highBytes: Int, lowBytes: Int) {
    self.highRecords = highRecords
    self.lowRecords = lowRecords
    self.highBytes = highBytes
    self.lowBytes = lowBytes
  }

  public mutating func sent(bytes n: Int) {
    records += 1
    bytes += n
    if records >= highRecords || bytes >= highBytes { isFull = true }
  }

  /// One record answered (or failed). True when this reply drained a full pipeline:
  /// the kept reads may go on.
  public mutating func answered(bytes n: Int) -> Bool {
    records = max(0, records - 1)
    bytes = max(0, bytes - n)
    guard isFull, records <= lowRecords, bytes <= lowBytes else { return false }
    isFull = false
    return true
  }
}
