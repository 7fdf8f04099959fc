// Sliding-window rate limits (§7: 10 raise/lower per 10 000 ms; §7a: 20 messages per
// 1 000 ms; §6: 20 joins and leaves per 10 000 ms). "At most N in any window of W ms"
// means: accept at `now` unless the N-th most recent accepted action happened less
// than W ms ago.

/// Remembers the last `limit` accepted instants in a ring. The first instant is kept
/// inline: a connection that joined once and went idle (nearly every member) holds
/// its join window without a heap block. Limit and window come from the config at
/// each call, so they are not stored per window.
struct RateWindow {
  private var times = SmallList<Int64>()
  private var oldest: Int32 = 0  // ring index of the oldest kept instant once full

  /// Whether `tryAcquire` would grant an action now, without recording it.
  func allows(at nowMonoMs: Int64, limit: Int, windowMs: Int64) -> Bool {
    guard limit > 0 else { return false }
    switch times {
    case .empty: return true
    case .one(let first): return limit > 1 || nowMonoMs - first >= windowMs
    case .many(let all): return all.count < limit || nowMonoMs - all[Int(oldest)] >= windowMs
    }
  }

  /// Records and returns true when the action is within `limit` per `windowMs`; a
  /// refused action is not recorded (§7 "nothing changes").
  mutating func tryAcquire(at nowMonoMs: Int64, limit: Int, windowMs: Int64) -> Bool {
    guard limit > 0 else { return false }
    switch times {
    case .empty:
      times = .one(nowMonoMs)
      return true
    case .one(let first):
      if limit > 1 {
        times = .many([first, nowMonoMs])
        return true
      }
      guard nowMonoMs - first >= windowMs else { return false }
      times = .one(nowMonoMs)
      return true
    case .many(var all):
      if all.count < limit {
        times = .empty  // drop the enum's reference so the append does not copy
        all.append(nowMonoMs)
        times = .many(all)
        return true
      }
      let index = Int(oldest)
      guard nowMonoMs - all[index] >= windowMs else { return false }
      times = .empty
      all[index] = nowMonoMs
      times = .many(all)
      oldest = Int32((index + 1) % all.count)
      return true
    }
  }
}
