// Sliding-window rate limits (§7: 10 raise/lower per 10 000 ms; §7a: 20 messages per
// 1 000 ms). "At most N in any window of W ms" means: accept at `now` unless the N-th
// most recent accepted action happened less than W ms ago.

/// Remembers the last `limit` accepted instants in a ring.
struct RateWindow {
  let limit: Int
  let windowMs: Int64
  private var times: [Int64] = []
  private var oldest = 0  // ring index of the oldest kept instant once full

  init(limit: Int, windowMs: Int64) {
    self.limit = limit
    self.windowMs = windowMs
  }

  /// Records and returns true when the action is within the limit; a refused action is
  /// not recorded (§7 "nothing changes").
  mutating func tryAcquire(at nowMonoMs: Int64) -> Bool {
    guard limit > 0 else { return false }
    if times.count < limit {
      times.append(nowMonoMs)
      return true
    }
    guard nowMonoMs - times[oldest] >= windowMs else { return false }
    times[oldest] = nowMonoMs
    oldest = (oldest + 1) % limit
    return true
  }
}
