import EventLoop
import Logging
import RelayCluster
import RelayCore
import RelayPrimitives

/// The durable single node (`--data-dir`, contract §12a; docs/operating.md): the
/// third input log beside `LocalLog` and `ClusterNode`. Each input becomes the
/// cluster's record (RelayClusterNode/ReplicatedInputs.swift), is applied at once
/// by the server's `Replica` exactly as a cluster node applies what it reads back,
/// and its frame is appended to the current log segment; snapshots are the replica's own
/// (`Replica.snapshot()`). A restart is a replay of the same records
/// (DiskLog+Recovery.swift), so the disk holds nothing the cluster does not define.
///
/// Each record is encoded once, straight into the turn's buffer (a message from the
/// socket's read buffer, its only copy), and the replica applies it from there
/// (`Replica.apply(batch:…)`): the path of its replay after a restart.
///
/// Nothing a record caused leaves the process before the record is written: the
/// turn's frames are written in one `write` before the loop flushes any socket
/// (`Loop.beforeFlush`). With `--fsync always` the effects of every record of a turn
/// are held until that write and its `fdatasync` (group commit), then performed in
/// order; with `no|everysec` those that only queue bytes to sockets are performed at
/// once (`performsAtOnce`), the rest held. A write that fails (disk full, a file-size
/// limit, an I/O error) is retried at once as a snapshot when effects were performed
/// (`coverPerformed`); while it fails, effects are held and the relay is unavailable
/// (§12: `/readyz` 503, commands `unavailable`) until a retry succeeds: nothing
/// answered is then missing from the disk.
final class DiskLog: ReplicatedInputs {
  /// The server outlives its input log; unowned(unsafe): no reference count to check
  /// on every record.
  unowned(unsafe) let server: RelayServer
  var host: any ReplicaHost { server }
  let config: DurableConfig
  let logger: Logger
  let dir: DataDir
  var number: UInt32 = 0
  /// The seed of the replicated ids, in every file's header.
  var seed: [UInt8] = []
  var segment: AppendFile?
  /// Frames of records applied but not yet written, and what they caused.
  /// `@exclusivity(unchecked)` on the state every record touches: the loop thread's
  /// alone, never accessed while another access to it is open, and the runtime's
  /// dynamic exclusivity checks cost more per record than the updates.
  @exclusivity(unchecked) var pending = BinaryWriter(capacity: 1 << 16)
  @exclusivity(unchecked) var held: [Applied] = []
  @exclusivity(unchecked) var performing: [Applied] = []
  @exclusivity(unchecked) var snapshotDue = false
  /// Effects were performed at once (`performsAtOnce`) since the last write.
  @exclusivity(unchecked) var performedUnwritten = false
  /// The snapshot being joined and written on the thread pool (DiskLog+Snapshots.swift)
  /// and the newest one due meanwhile (SnapshotQueue.swift).
  var snapshots = SnapshotQueue<(parts: SnapshotParts, position: UInt64)>(waitingMax: 1)
  /// Written since the last `fdatasync` (`everysec`).
  var unsynced = false
  /// The last write, sync or snapshot that failed; nil while the disk takes writes.
  var failure: FileError?
  @exclusivity(unchecked) var appliedAtLoopMs: UInt64 = 0
  @exclusivity(unchecked) var lastRecordLoopMs: UInt64 = 0
  var housekeeping: EventLoop.Timer?
  var tickTimer: EventLoop.Timer?
  var retryTimer: EventLoop.Timer?
  var ticks = DeadlineTimer()
  /// Outside the running loop (recovery, the last commit) a due snapshot is written
  /// on the spot: no thread pool job may be left queued.
  var snapshotsOnLoop = true
  var stopped = false
  @exclusivity(unchecked) var stats = DiskStats()

  /// How long after a failed write the relay tries again (by a snapshot, which also
  /// frees the space of the segments it covers).
  static let retryMs: UInt64 = 2_000
  /// Beats are logged this often while clients are connected, so a crash's instant
  /// (when their participants became lost, §12a) is known to within it.
  static let beatMs: UInt64 = 1_000

  init(server: RelayServer, config: DurableConfig, logger: Logger) throws(DataDirRefusal) {
    self.server = server
    self.config = config
    self.logger = logger
    self.dir = try DataDir(path: config.dir)
  }

  var acceptsInputs: Bool { failure == nil && !stopped && number != 0 }
  var isBackedUp: Bool { false }
  var takesBorrowedText: Bool { true }

  /// While the disk fails, only what must reach the state anyway is taken — a socket
  /// closed, time passing — and written once it works again; commands and new
  /// sockets are refused (`failed`).
  func append(_ input: LogInput, failed: (() -> Void)?) {
    guard !stopped, number != 0 else { return failed?() ?? () }
    if failure != nil {
      switch input {
      case .closed, .tick, .beat, .leave: break
      default: return failed?() ?? ()
      }
    }
    let batch = LogBatch(node: number, inputs: [input])
    record(timeMs: nil) { DataFrame.appendRecord(position: $0, timeMs: $1, batch: batch, to: &$2) }
  }

  /// Applies one record now and queues its frame and its effects for the commit.
  /// `timeMs`: the record's instant (default: the wall clock, like Redis's `TIME` in
  /// a cluster; the replica's clock takes only its forward steps).
  @discardableResult
  func record(_ batch: LogBatch, timeMs: Int64? = nil) -> Applied {
    let frame = { DataFrame.appendRecord(position: $0, timeMs: $1, batch: batch, to: &$2) }
    guard record(timeMs: timeMs, holding: true, frame: frame) else { return Applied() }
    return held.last ?? Applied()
  }

  /// A socket's message (`takesBorrowedText`): its record is written from the read
  /// buffer into the turn's buffer and applied from there, its only copy.
  func text(_ id: ConnectionID, borrowed payload: UnsafeRawBufferPointer) -> Bool {
    guard acceptsInputs else { return false }  // the copy's `append` answers `unavailable`
    let node = number
    record(timeMs: nil) { position, t, w in
      DataFrame.appendTextRecord(position: position, timeMs: t, node: node, connection: id.raw, text: payload, to: &w)
    }
    return true
  }

  /// The frame is encoded once, at the end of the turn's buffer, and the replica
  /// applies the batch from there: the bytes a restart replays, by the same path
  /// (`Replica.apply(batch:…)`). False without a replica. `holding`: the effects are
  /// held whatever `performsAtOnce` says (the caller reads the outcome, `held.last`).
  @discardableResult
  private func record(
    timeMs: Int64?, holding: Bool = false, frame: (_ position: UInt64, _ timeMs: Int64, _ to: inout BinaryWriter) -> Range<Int>
  ) -> Bool {
    guard let replica = server.replica else { return false }
    let position = replica.position + 1
    let t = max(1, timeMs ?? Loop.wallClockMs())
    let encoded = frame(position, t, &pending)
    let applied = pending.bytes.withUnsafeBytes {
      replica.apply(batch: UnsafeRawBufferPointer(rebasing: $0[encoded]), position: position, timeMs: t)
    }
    let nowMs = server.loop.nowMs
    appliedAtLoopMs = nowMs
    lastRecordLoopMs = nowMs
    stats.records += 1
    if applied.snapshotDue != nil { snapshotDue = true }
    if let reason = applied.rejected {
      logger.warning("data dir record rejected by the replica", metadata: ["position": "\(position)", "reason": "\(reason)"])
    }
    if !holding, performsAtOnce(applied) {
      performedUnwritten = true
      server.performApplied(applied)
    } else {
      held.append(applied)
    }
    return true
  }

  /// Whether a record's effects are performed as it is applied rather than held for
  /// the commit: with `--fsync no|everysec`, while the disk takes writes and nothing
  /// is held before them (their order), when they only queue bytes to sockets. The
  /// loop flushes sockets only after `beforeFlush`, which writes the turn's frames
  /// first (`commit`), so none of those bytes leaves before its record is handed to
  /// the kernel. Webhooks, pushes and HTTP answers are held: they may leave
  /// the process on their own.
  private func performsAtOnce(_ applied: Applied) -> Bool {
    guard config.fsync != .always, failure == nil, held.isEmpty, performing.isEmpty, applied.admin.isEmpty else {
      return false
    }
    for effect in applied.effects {
      switch effect {
      case .send, .close: continue
      case .webhook, .push: return false
      }
    }
    return true
  }

  /// End of a loop turn (and of the process): writes the turn's frames, syncs them
  /// per `--fsync`, snapshots if one is due, then performs the held effects. Effects
  /// may log more records (a close): a few passes take those too.
  func commit() {
    var passes = 0
    while !pending.bytes.isEmpty || !held.isEmpty || snapshotDue, failure == nil, passes < 4 {
      passes += 1
      guard writePending() else { return coverPerformed() }
      performedUnwritten = false
      if snapshotDue {
        snapshotDue = false
        guard snapshotsOnLoop ? compact() : snapshotInBackground() else { return }
      }
      // Performed from a second array, so effects that log more records (a close)
      // append to an empty `held`; both keep their capacity from turn to turn.
      swap(&held, &performing)
      for applied in performing { server.performApplied(applied) }
      performing.removeAll(keepingCapacity: true)
    }
    armTicker()
  }

  func writePending() -> Bool {
    guard !pending.bytes.isEmpty else { return true }
    guard let segment else { return false }
    do {
      try segment.write(pending.bytes)
      stats.bytesWritten &+= UInt64(pending.bytes.count)
      pending.removeAll(keepingCapacity: pending.bytes.count < 1 << 20)
      if config.fsync == .always {
        try segment.sync()
        stats.fsyncs &+= 1
      } else {
        unsynced = true
      }
      return true
    } catch {
      fail(error)
      return false
    }
  }

  /// The one place the replica's snapshot is produced for the disk (its cost and
  /// encoding are the cluster's, RelayClusterNode/ClusterNode+Snapshots.swift).
  func encodeSnapshot(_ replica: Replica) -> [UInt8] { replica.snapshot() }

  /// Writes a snapshot of everything applied (pending frames included: it covers
  /// them) on the loop thread, starts a new segment after it, and removes what the
  /// snapshot before it covers (DataDirLayout.obsolete). False (and failing) if any
  /// write failed. The retry after a failed write: routine snapshots are written off
  /// the loop (`snapshotInBackground`).
  @discardableResult
  func compact() -> Bool {
    guard let replica = server.replica else { return false }
    let position = replica.position
    let started = Loop.hrtimeNs()
    let body = encodeSnapshot(replica)
    let header = DataFileHeader(kind: .snapshot, rules: config.rulesVersion, seed: seed).encoded()
    do {
      try dir.writeAtomically(DataDirFile.snapshot(position: position).name, header + DataFrame.encode(body))
      try openSegment(start: position + 1)
    } catch {
      fail(error)
      return false
    }
    pending.removeAll(keepingCapacity: true)
    _ = snapshots.dropWaiting()
    unsynced = false
    stats.snapshots += 1
    stats.snapshotBytes = UInt64(body.count)
    stats.snapshotNs = Loop.hrtimeNs() &- started
    removeObsolete(after: position)
    return true
  }

  /// A new, empty segment for records from `start` on (replacing one of that name:
  /// it can only hold records a snapshot already covers, or none). `syncNow` false:
  /// the caller has its file and the dir synced off the loop before it counts on
  /// them (`--fsync everysec|no`: within the second `everysec` promises).
  func openSegment(start: UInt64, syncNow: Bool = true) throws(FileError) {
    let file = try AppendFile(dir: dir, name: DataDirFile.log(start: start).name, truncate: true)
    do {
      try file.write(DataFileHeader(kind: .log, rules: config.rulesVersion, seed: seed).encoded())
      if syncNow {
        try file.sync()
        try dir.syncDir()
      }
    } catch {
      file.close()
      throw error
    }
    segment?.close()
    segment = file
  }

  func removeObsolete(after position: UInt64) {
    guard let names = try? dir.names() else { return }
    let old = DataDirLayout(names: names).obsolete(afterSnapshot: position)
    for p in old.snapshots { dir.remove(DataDirFile.snapshot(position: p).name) }
    for s in old.segments { dir.remove(DataDirFile.log(start: s).name) }
  }

  func fail(_ error: FileError) {
    if failure == nil {
      logger.error(
        "data dir write failed: commands answer unavailable until a write succeeds again",
        metadata: ["error": "\(error)", "retry-ms": "\(Self.retryMs)"])
    }
    failure = error
    stats.failures += 1
    retryTimer?.start(afterMs: Self.retryMs) { [unowned self] in self.retry() }
  }

  /// A retry is a snapshot: it covers the records not yet written, and the segments
  /// it makes obsolete free their space. True once it succeeded.
  @discardableResult
  private func retry() -> Bool {
    guard let error = failure, !stopped else { return false }
    failure = nil
    guard compact() else { return false }
    logger.notice("data dir writable again", metadata: ["after": "\(error)"])
    commit()
    return true
  }

  /// The turn's write failed after effects were performed at once, their bytes still
  /// queued (the flush comes after the commit): a snapshot now covers their records;
  /// if that fails too, the sockets they were queued to are reset, so no answer of a
  /// record the disk does not hold leaves the process (§12a: never lost by a crash).
  private func coverPerformed() {
    guard performedUnwritten else { return }
    performedUnwritten = false
    if !retry() { server.loop.resetDirtyConnections() }
  }
}

/// Running totals for `/metrics` (`relay_data_dir_*`).
struct DiskStats {
  var records: UInt64 = 0
  var bytesWritten: UInt64 = 0
  var fsyncs: UInt64 = 0
  var failures: UInt64 = 0
  var snapshots: UInt64 = 0
  var snapshotBytes: UInt64 = 0
  var snapshotNs: UInt64 = 0
  var replayed: UInt64 = 0
  var replayNs: UInt64 = 0
}
