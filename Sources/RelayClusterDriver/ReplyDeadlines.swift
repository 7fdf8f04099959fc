import RelayPrimitives

/// The liveness rule of one Redis connection (docs/cluster.md, "Backpressure"): every
/// request has a time limit, counted from the later of the request and Redis's last
/// reply on that connection. A deep pipeline whose replies keep coming is slow behind
/// the node's own queue, not a Redis that stopped answering; only silence for the
/// oldest request's limit declares the connection (and so the bus) lost.
public struct ReplyDeadlines: Sendable {
  private var limits = FIFOQueue<(sentMs: UInt64, limitMs: UInt64)>()
  /// When Redis last answered (loop ms).
  public private(set) var lastReplyMs: UInt64 = 0

  public init() {}

  public var awaited: Int { limits.count }

  public mutating func sent(nowMs: UInt64, limitMs: UInt64) { limits.append((nowMs, limitMs)) }

  /// A reply came (for the oldest request, RESP2 replies being in order).
  public mutating func answered(nowMs: UInt64) {
    lastReplyMs = nowMs
    _ = limits.popFirst()
  }

  /// Since when Redis owes a reply without having said anything, if one is awaited.
  public var silentSinceMs: UInt64? { limits.first.map { max($0.sentMs, lastReplyMs) } }

  /// Redis has said nothing for the oldest request's limit: the connection is lost.
  public func overdue(nowMs: UInt64) -> Bool {
    guard let oldest = limits.first, let since = silentSinceMs else { return false }
    return nowMs > since + oldest.limitMs
  }

  /// Ready as far as this connection goes: not silent for `stallMs` while owing a reply.
  public func responsive(nowMs: UInt64, stallMs: UInt64) -> Bool {
    guard let since = silentSinceMs else { return true }
    return nowMs < since + stallMs
  }
}
