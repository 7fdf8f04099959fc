import RelayPrimitives

// The rules behind `NodeLifecycle.handle` (docs/cluster.md, "Joining", "Bounded
// history", "Redis high availability").
extension NodeLifecycle {
  /// Same generation with a replica: carry on from where it was once the log is known
  /// to still hold what it applied. A new one: reset and load its newest snapshot.
  mutating func enter(_ g: String, hasReplica: Bool, _ out: inout [Action]) {
    redisAttempts = 0
    if generation == g, hasReplica, replicaGeneration == g {
      guard lastId != "0" else { return carryOn(&out) }
      return out.append(.verifyHistory(lastId: lastId))
    }
    out.append(.driver(.historyEnded))
    if generation != nil { out.append(.resetNotice) }
    generation = g
    number = 0
    pendingJoin = nil
    out.append(.dropUnloggedCloses)
    loadSnapshot(&out)
  }

  /// The history is intact: read on from the last record applied; a node that still
  /// has its number (and no join pending) is ready again at once.
  mutating func carryOn(_ out: inout [Action]) {
    guard let g = generation else { return }
    state = .catchingUp
    out.append(.driver(.reconnected))
    out.append(.read(generation: g, epoch: readEpoch, lastId: lastId))
    if number != 0 && pendingJoin == nil { becomeReady(reconnected: true, &out) }
  }

  /// A fresh replica: reads of the old one no longer count.
  mutating func loadSnapshot(_ out: inout [Action]) {
    guard let g = generation else { return }
    state = .catchingUp
    readEpoch &+= 1
    out.append(.loadSnapshot(generation: g))
  }

  mutating func replace(_ g: String, _ why: Replacement, _ out: inout [Action]) {
    readEpoch &+= 1
    generation = nil
    out.append(.replaceGeneration(old: g, why))
  }

  /// What an applied record means for this node, in the replica's order: missing
  /// records first, then a hand-over, this node's death, its join's answer, a due
  /// snapshot, a divergence.
  mutating func applied(_ id: String, _ o: Outcome, _ out: inout [Action]) {
    if o.lostRecords { return rebuild(reason: "records missing from the log", &out) }
    if o.upgrade { return out.append(.handOver) }
    if number != 0, o.deaths.contains(number) || !o.listed && pendingJoin == nil { return declaredDead(&out) }
    if let pending = pendingJoin {
      if let mine = o.joined.first(where: { $0.nonce == pending }) { return joined(mine.number, &out) }
      if let refused = o.refused.first(where: { $0.nonce == pending }) {
        return out.append(.fatal("the cluster refused this node: \(refused.reason)"))
      }
    }
    if let position = o.snapshotDue { out.append(.snapshotDue(position: position, id: id)) }
    if let position = o.diverged {
      out.append(.divergedNotice(position: position))
      restart(reason: "node rebuilding its state", &out)
    }
  }

  mutating func readEnded(_ epoch: UInt64, _ count: Int, _ view: TickerView, _ out: inout [Action]) {
    guard reading(epoch), let g = generation else { return }
    if count < Self.readCount {
      out.append(.driver(.caughtUp))
      // The end of the log is reached: join if this node has no number yet.
      if state == .catchingUp, number == 0, pendingJoin == nil { join(&out) }
    }
    armTicker(view, &out)
    out.append(.read(generation: g, epoch: readEpoch, lastId: lastId))
  }

  /// Logs `join` with a fresh nonce; the number comes back with the applied record.
  mutating func join(_ out: inout [Action]) {
    state = .catchingUp
    let nonce = UInt64.random(in: 1...UInt64.max, using: &random)
    pendingJoin = nonce
    out.append(.join(nonce: nonce))
  }

  mutating func joined(_ n: UInt32, _ out: inout [Action]) {
    number = n
    pendingJoin = nil
    out += [.setLocalNode(n), .joined(n)]
    becomeReady(reconnected: false, &out)
  }

  mutating func becomeReady(reconnected: Bool, _ out: inout [Action]) {
    state = .ready
    out += [.retryUnloggedCloses, .ready(reconnected: reconnected)]
  }

  /// The cluster declared this node dead: its sockets' participants are gone
  /// everywhere, so they close (1012) and resume elsewhere; it joins again.
  mutating func declaredDead(_ out: inout [Action]) {
    out.append(.declaredDead)
    number = 0
    out += [.dropUnloggedCloses, .setLocalNode(0), .closeSockets(reason: "node rejoining the cluster")]
    join(&out)
  }

  /// Nothing more of the current read is applied; the stored snapshot's position
  /// decides between a rebuild and a new generation.
  mutating func rebuild(reason: String, _ out: inout [Action]) {
    guard generation != nil else { return }
    readEpoch &+= 1
    out.append(.askStoredPosition(reason: reason))
  }

  /// When a newer snapshot than this replica's state is stored, the records were
  /// trimmed while this node lagged: rebuild from it. When none is, the log really
  /// lost them; a rebuild is tried, and past `rebuildsAllowed` a new generation starts.
  mutating func storedPosition(_ stored: UInt64, _ mine: UInt64, _ reason: String, _ out: inout [Action]) {
    guard let g = generation else { return }
    rebuildsWithoutProgress = stored > mine ? 0 : rebuildsWithoutProgress + 1
    if rebuildsWithoutProgress > Self.rebuildsAllowed { return replace(g, .inconsistent(reason: reason), &out) }
    out.append(.rebuilding(reason: reason))
    restart(reason: "node rebuilding its state", &out)
  }

  mutating func restart(reason: String, _ out: inout [Action]) {
    number = 0
    pendingJoin = nil
    out += [.setLocalNode(0), .closeSockets(reason: reason)]
    loadSnapshot(&out)
  }

  mutating func lost(leaving: Bool, _ out: inout [Action]) {
    guard state != .down, state != .stopped else { return }
    let wasUp = state == .ready || state == .catchingUp
    state = .down
    _ = tickTimer.disarm()
    out.append(.busLost(wasUp: wasUp))
    guard !leaving else { return }
    let delay = UInt64(backoff.delayMs(attempt: redisAttempts, using: &random))
    redisAttempts += 1
    out.append(.reconnect(afterMs: delay))
  }

  /// Only the ticker (the live node with the lowest number, the same on every
  /// replica) arms the timer, for its next deadline in log time.
  mutating func armTicker(_ view: TickerView, _ out: inout [Action]) {
    let change = state == .ready && view.isTicker
      ? tickTimer.arm(dueMs: view.dueMs, nowMs: view.logNowMs) : tickTimer.disarm()
    switch change {
    case .keep: break
    case .stop: out.append(.stopTick)
    case .start(let afterMs): out.append(.armTick(afterMs: afterMs))
    }
  }
}
