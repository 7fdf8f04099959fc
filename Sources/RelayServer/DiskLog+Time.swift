import EventLoop
import RelayCluster
import RelayCore
import RelayPrimitives

// Time on the durable single node: the core's deadlines fire through logged `tick`
// records, as a cluster's ticker logs them (NodeLifecycle.armTicker), so a replay
// fires each at the same record; beats mark the process alive; `everysec` syncs.
extension DiskLog {
  func startTimers() {
    snapshotsOnLoop = false
    let loop = server.loop
    let timer = EventLoop.Timer(loop: loop)
    timer.start(afterMs: Self.beatMs, repeatMs: Self.beatMs) { [unowned self] in self.housekeep() }
    housekeeping = timer
    tickTimer = EventLoop.Timer(loop: loop)
    retryTimer = EventLoop.Timer(loop: loop)
    armTicker()
    // Effects performed at once (`performsAtOnce`) wait in the sockets' queues: the
    // turn's frames are written before either flush pass. `always` holds every effect
    // until its own commit (one `fdatasync` per turn).
    if config.fsync != .always { loop.beforeFlush = { [unowned(unsafe) self] in self.commit() } }
  }

  /// Once a second: `everysec`'s `fdatasync` (one call covers the second's writes,
  /// on libuv's thread pool so a slow disk does not stall the loop), and a beat
  /// while clients are connected and nothing else was logged.
  private func housekeep() {
    if config.fsync == .everysec, unsynced, failure == nil, let segment, segment.syncsInFlight == 0 {
      syncInBackground(segment)
    }
    if failure == nil, server.websocketCount > 0, server.loop.nowMs >= lastRecordLoopMs + Self.beatMs {
      append(.beat, failed: nil)
    }
  }

  /// The log's time now, as this process estimates it: the replica's clock plus the
  /// loop time since it last moved.
  var logNowMs: Int64 { (server.replica?.clockMs ?? 0) + Int64(server.loop.nowMs &- appliedAtLoopMs) }

  func armTicker() {
    guard !stopped, let replica = server.replica, let timer = tickTimer else { return }
    timer.follow(ticks.arm(dueMs: replica.core.nextDeadline, nowMs: logNowMs)) { [unowned self] in
      self.ticks.fired()
      self.append(.tick, failed: nil)
    }
  }

  /// The drain is over: no more timers (the loop ends with its last handle).
  func stopTimers() {
    for timer in [housekeeping, tickTimer, retryTimer] { timer?.close() }
    housekeeping = nil
    tickTimer = nil
    retryTimer = nil
  }

  /// After the loop: this node leaves (a clean stop), and everything is written and
  /// synced whatever `--fsync` says.
  func finish() {
    guard !stopped else { return }
    server.loop.beforeFlush = nil
    snapshotsOnLoop = true
    if number != 0 { append(.leave, failed: nil) }
    commit()
    stopped = true
    try? segment?.sync()
    segment?.close()
    segment = nil
    dir.close()
  }
}

extension DiskLog {
  /// The turn's records are written (and synced, per `--fsync`) before anything they
  /// caused leaves the process.
  func beforeFlush() { commit() }

  /// The log itself is closed after the loop (`loopEnded`).
  func stop(force: Bool) { stopTimers() }

  func loopEnded() { finish() }

  var unavailable: (state: String, message: String) { ("data dir unavailable", "data dir not writable; retry") }

  /// `relay_data_dir_*` (docs/operating.md).
  var figures: [LogFigure] {
    let s = stats
    return [
      .gauge("relay_data_dir_writable", failure == nil ? 1 : 0),
      .counter("relay_data_dir_records_total", s.records),
      .counter("relay_data_dir_bytes_written_total", s.bytesWritten),
      .counter("relay_data_dir_fsyncs_total", s.fsyncs),
      .counter("relay_data_dir_write_failures_total", s.failures),
      .counter("relay_data_dir_snapshots_total", s.snapshots),
      .gauge("relay_data_dir_snapshot_bytes", Int(clamping: s.snapshotBytes)),
      .seconds("relay_data_dir_snapshot_seconds", Double(s.snapshotNs) / 1e9),
      .counter("relay_data_dir_replayed_records_total", s.replayed),
      .seconds("relay_data_dir_replay_seconds", Double(s.replayNs) / 1e9),
    ]
  }
}

extension RelayServer {
  /// `--data-dir`: locks the dir, loads the state and joins, before the port listens.
  func startDisk() throws(DataDirRefusal) {
    guard let durable = config.durable, disk == nil else { return }
    let log = try DiskLog(server: self, config: durable, logger: logger)
    disk = log
    do {
      try log.recover()
    } catch {
      log.stopped = true
      log.dir.close()
      throw error
    }
    log.startTimers()
  }
}
