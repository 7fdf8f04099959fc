// protocol/ §5 heartbeats, in every mode (standalone, `--data-dir`, cluster): a socket's
// liveness is a fact about this process's sockets, not shared state, so the shell
// owns the one machine (RelayPrimitives `Heartbeats`) and one libuv timer armed at its
// next check. A silent socket is dropped without a close handshake (the peer is
// presumed dead: waiting for its close reply would only hold its buffers for the
// close timeout), and the core hears of it as the ordinary `closed(clean: false)`
// input when the socket is gone: the same input, logged or not, as any socket that
// ends without a handshake, so lost, grace and §9a pushes follow one path.
import EventLoop
import RelayCore
import RelayPrimitives

extension RelayServer {
  /// Bounded per loop turn as the core's ticks are (protocol/ §16): at most
  /// `maxDeadlinesPerTick` checks, and as many drops as lost participants of full
  /// sessions fit in the core's `maxTickDeliveries` (each drop's `participant.lost`
  /// may reach a whole session).
  static func makeHeartbeats(_ core: CoreConfig) -> Heartbeats {
    Heartbeats(
      intervalMs: core.heartbeatIntervalMs, timeoutMs: core.heartbeatTimeoutMs,
      maxChecksPerCall: core.maxDeadlinesPerTick,
      maxTimeoutsPerCall: max(1, core.maxTickDeliveries / max(1, core.maxParticipants)))
  }

  /// A relay WebSocket opened: its checks start at the upgrade (a socket waiting for
  /// `hello` may die too).
  func heartbeatOpened(_ conn: ServerConnection) {
    conn.heartbeat = heartbeats.opened(conn.id.raw, nowMs: Int64(loop.nowMs))
    armHeartbeatTimer()
  }

  /// Fires the checks due at `nowMs` (the loop's time; tests pass one of their
  /// choosing): pings to the live, drops for the silent.
  func heartbeatsDue(nowMs: Int64) {
    let due = heartbeats.due(nowMs: nowMs)
    for raw in due.ping {
      if let conn = connections[ConnectionID(raw)] { sendPing(conn) }
    }
    for raw in due.timedOut {
      // Only an open socket: one we are closing ends at its close deadline (a clean
      // end), and one already ending is on its way out.
      guard let conn = connections[ConnectionID(raw)], conn.acceptsFrames else { continue }
      conn.drop()
    }
    armHeartbeatTimer()
  }

  private func armHeartbeatTimer() {
    guard !stopped else { return }
    let next = heartbeats.nextDeadlineMs
    if next == armedHeartbeatMs { return }
    armedHeartbeatMs = next
    guard let next else {
      heartbeatTimer?.stop()
      return
    }
    let timer = heartbeatTimer ?? EventLoop.Timer(loop: loop)
    heartbeatTimer = timer
    // At least 1 ms: a batch cut at a bound leaves the next check due already, and
    // it must get a turn of its own, with I/O (and the drops' closes) in between.
    let delay = max(1, next - Int64(loop.nowMs))
    timer.start(afterMs: UInt64(delay)) { [unowned self] in
      self.armedHeartbeatMs = nil
      self.heartbeatsDue(nowMs: Int64(self.loop.nowMs))
    }
  }

  func stopHeartbeats() {
    heartbeatTimer?.close()
    heartbeatTimer = nil
    armedHeartbeatMs = nil
  }
}
