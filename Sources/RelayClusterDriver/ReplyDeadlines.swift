import RelayPrimitives

/// The liveness rule of one Redis connection (docs/cluster.md, "Backpressure"): every
/// request has a time limit, counted from the later of the request and Redis's last
/// reply on that connection. A deep pipeline whose replies keep coming is slow behind
/// the node's own queue, not a Redis that stopped answering; only silence for the
/// oldest request's limit declares the connection (and so the bus) lost.
///
/// Silence counts only as far as the owner's previous check (`check(nowMs:stallMs:)`),
/// not up to now. The owner checks from a timer, and libuv runs timers before it polls
/// for I/O (uv_run's order): after one long loop turn a check would see a request
/// overdue whose reply already waits, unread, in the socket. Between two checks the
/// loop has polled, so a silence that lasts from one check to the next is Redis's own.
public struct ReplyDeadlines: Sendable {
  private var limits = FIFOQueue<(sentMs: UInt64, limitMs: UInt64)>()
  /// When Redis last answered (loop ms).
  public private(set) var lastReplyMs: UInt64 = 0
  /// The previous check: when, and since when Redis owed a reply then.
  private var checked: (atMs: UInt64, silentSinceMs: UInt64?) = (0, nil)
  /// Silent for the stall limit, as the last check confirmed; an answer clears it.
  public private(set) var stalled = false

  public init() {}

  public var awaited: Int { limits.count }

  public mutating func sent(nowMs: UInt64, limitMs: UInt64) { limits.append((nowMs, limitMs)) }

  /// A reply came (for the oldest request, RESP2 replies being in order).
  public mutating func answered(nowMs: UInt64) {
    lastReplyMs = nowMs
    stalled = false
    _ = limits.popFirst()
  }

  /// Since when Redis owes a reply without having said anything, if one is awaited.
  public var silentSinceMs: UInt64? { limits.first.map { max($0.sentMs, lastReplyMs) } }

  /// The owner's periodic check: whether the connection is lost (Redis silent past the
  /// oldest request's limit); updates `stalled` (silent for `stallMs`). Both count the
  /// silence confirmed by the previous check (see the type's comment).
  public mutating func check(nowMs: UInt64, stallMs: UInt64) -> Bool {
    let since = silentSinceMs
    let confirmed: UInt64
    if let since, since == checked.silentSinceMs, checked.atMs > since {
      confirmed = checked.atMs - since
    } else {
      confirmed = 0
    }
    checked = (nowMs, since)
    stalled = since != nil && confirmed >= stallMs
    guard let oldest = limits.first else { return false }
    return confirmed > oldest.limitMs
  }
}
