import EventLoop
import RelayCluster
import RelayCore

// Routine snapshots of the durable single node (docs/operating.md, "Data dir"), as the
// cluster takes its own (RelayClusterNode/ClusterNode+Snapshots.swift): on the loop
// only the replica's skeleton is captured (replay payloads by reference) and the next
// segment started; joining the bytes, writing, syncing and renaming the file run on
// libuv's thread pool, so a snapshot of megabytes stalls no socket. Until the file is durable the
// records it covers are still in the segments before it, so a crash meanwhile
// restarts from the previous snapshot and replays them: nothing depends on the
// snapshot but the disk space it frees.
extension DiskLog {
  /// What a snapshot job on the thread pool reports back.
  struct SnapshotWritten: Sendable {
    var bytes: Int
    var ns: UInt64
    var error: FileError?
  }

  /// A snapshot is due at the replica's position: the records so far are written
  /// (the caller did), the snapshot is captured, and a new segment starts after it.
  /// False (and failing) if the new segment cannot be made.
  func snapshotInBackground() -> Bool {
    guard let replica = server.replica else { return false }
    let position = replica.position
    let parts = replica.snapshotParts()
    // The old segment's last writes are synced off the loop too (`everysec`: within
    // its second); `always` synced them already.
    if config.fsync == .everysec, unsynced, let old = segment { syncInBackground(old) }
    do {
      try openSegment(start: position + 1, syncNow: config.fsync == .always)
    } catch {
      fail(error)
      return false
    }
    // The new segment's header is synced by the next `everysec` sync, its name by the
    // snapshot's own sync of the dir.
    unsynced = config.fsync != .always
    if let now = snapshots.due((parts, position)).make { writeSnapshot(now.parts, at: now.position) }
    return true
  }

  private func writeSnapshot(_ parts: SnapshotParts, at position: UInt64) {
    let handle = dir.handle
    let header = DataFileHeader(kind: .snapshot, rules: config.rulesVersion, seed: seed).encoded()
    let name = DataDirFile.snapshot(position: position).name
    server.loop.offload({ () -> SnapshotWritten in
      let started = Loop.hrtimeNs()
      let body = parts.joined()
      var done = SnapshotWritten(bytes: body.count, ns: 0)
      do throws(FileError) {
        try handle.writeAtomically(name, [header, DataFrame.header(for: body), body])
      } catch {
        done.error = error
      }
      done.ns = Loop.hrtimeNs() &- started
      return done
    }) { [weak self] done in
      self?.snapshotWritten(done, at: position)
    }
  }

  private func snapshotWritten(_ done: SnapshotWritten, at position: UInt64) {
    guard !stopped else { return _ = snapshots.abandon() }
    if let error = done.error {
      _ = snapshots.abandon()
      return fail(error)  // the retry writes a snapshot of everything on the loop
    }
    stats.snapshots += 1
    stats.snapshotBytes = UInt64(done.bytes)
    stats.snapshotNs = done.ns
    removeObsolete(after: position)
    if let next = snapshots.finished() { writeSnapshot(next.parts, at: next.position) }
  }

  /// `fdatasync` of `file` on libuv's thread pool (FileSync); a failure makes the
  /// relay unavailable as a failed write does.
  func syncInBackground(_ file: AppendFile) {
    unsynced = false
    file.syncsInFlight += 1
    FileSync.dataSync(file.fd, on: server.loop) { [weak self] result in
      file.syncsInFlight -= 1
      if file.closeWhenSynced, file.syncsInFlight == 0 { file.close() }
      guard let self, !self.stopped else { return }
      self.stats.fsyncs &+= 1
      if result != 0 { self.fail(FileError("fdatasync", file.path, code: -result)) }
    }
  }
}
