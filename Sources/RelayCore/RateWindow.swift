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

  init() {}

  /// The kept instants in ring order and the index of the oldest once full: the
  /// whole state, for snapshots (SnapshotEncode.swift).
  var kept: (times: [Int64], oldest: Int32) {
    switch times {
    case .empty: return ([], oldest)
    case .one(let t): return ([t], oldest)
    case .many(let all): return (all, oldest)  // shared, not copied
    }
  }

  /// The window `kept` described; nil unless `oldest` indexes `times` (0 while the
  /// ring holds fewer than two instants), so a restored window can never trap.
  init?(times: [Int64], oldest: Int32) {
    guard oldest >= 0, Int(oldest) < max(1, times.count), times.count >= 2 || oldest == 0 else { return nil }
    switch times.count {
    case 0: self.times = .empty
    case 1: self.times = .one(times[0])
    default: self.times = .many(times)
    }
    self.oldest = oldest
  }

  /// The instant an action read at `now` counts at; see `tryAcquire`.
  private func countedInstant(_ now: Int64, lateMs: Int64, limit: Int, windowMs: Int64) -> Int64 {
    guard lateMs > 0 else { return now }
    let earliest = now - min(lateMs, windowMs * 64)  // a stall longer than that is not a stall
    let spacing = windowMs / Int64(limit)
    switch times {
    case .empty: return earliest
    case .one(let newest): return min(now, max(earliest, newest + spacing))
    case .many(let all):
      let newest = all[(Int(oldest) + all.count - 1) % all.count]
      return min(now, max(earliest, newest + spacing))
    }
  }

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
  ///
  /// `lateMs`: the input may have reached the relay that long before `nowMonoMs` (the
  /// loop was stalled; `Instant.lateMs`). A backlog a stall bunched together is then
  /// counted as if it had been read as it came, at the earliest instants the window
  /// allows: no earlier than `now - lateMs`, and spaced `windowMs / limit` apart
  /// after the newest kept instant. A client within its rate before the stall stays
  /// within it; the burst allowed is what the stall delayed, never more. Kept
  /// instants stay in order, so the ring's oldest entry is still the oldest.
  mutating func tryAcquire(at nowMonoMs: Int64, lateMs: Int64 = 0, limit: Int, windowMs: Int64) -> Bool {
    guard limit > 0 else { return false }
    let nowMonoMs = countedInstant(nowMonoMs, lateMs: lateMs, limit: limit, windowMs: windowMs)
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

/// A snapshot copies windows to write them off the loop (SnapshotParts.swift).
extension RateWindow: Sendable {}
