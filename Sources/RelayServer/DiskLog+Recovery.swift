import EventLoop
import Logging
import RelayCluster
import RelayCore
import RelayCrypto

#if canImport(Glibc)
  import Glibc
#endif

// A restart (contract §12a, docs/operating.md "What a restart keeps"): the newest
// readable snapshot, then every record after it, through the replica's own `apply` —
// the cluster's replay path. Then this process takes over as a new node of the log:
// the previous process's node leaves at the instant of its last record (its sockets
// are gone: their participants become lost then, and grace runs from then, §5), and
// this one joins at the wall clock's now, so the core's first tick sees the time
// spent down and ends what expired meanwhile (grace, ringing), with its events.
extension DiskLog {
  /// The header this binary writes and reads (the seed is compared separately).
  var expectedHeader: DataFileHeader { DataFileHeader(kind: .log, rules: config.rulesVersion, seed: []) }

  func refusal(_ header: DataFileHeader, file: String) -> DataDirRefusal {
    DataDirRefusal(
      "data dir \(config.dir) was written by \(header.versionText) (\(file)); this relay reads \(expectedHeader.versionText)"
    )
  }

  /// Loads the state, starts a segment, joins. Throws for a dir this relay must not
  /// use (exit 3): another version, another relay's lock, a dir it cannot write.
  func recover() throws(DataDirRefusal) {
    // A file-size limit (`ulimit -f`) must fail the write (EFBIG), not kill the relay.
    _ = signal(SIGXFSZ, SIG_IGN)
    let started = Loop.hrtimeNs()
    let names: [String]
    do { names = try dir.names() } catch { throw DataDirRefusal("cannot list the data dir: \(error)") }
    let layout = DataDirLayout(names: names)
    for name in layout.temporaries { dir.remove(name) }
    let replica = try restoreNewest(layout)
    try replay(layout, into: replica)
    stats.replayNs = Loop.hrtimeNs() &- started
    do {
      try openSegment(start: replica.position + 1)
    } catch {
      throw DataDirRefusal("cannot write to the data dir: \(error)")
    }
    takeOver(replica)
    commit()
    if let failure { throw DataDirRefusal("cannot write to the data dir: \(failure)") }
    logger.info(
      "data dir loaded",
      metadata: [
        "dir": "\(config.dir)", "position": "\(replica.position)", "replayed": "\(stats.replayed)",
        "ms": "\(stats.replayNs / 1_000_000)", "node": "\(number)", "fsync": "\(config.fsync.rawValue)",
      ])
  }

  /// The newest snapshot that reads back whole, else the one before, else the empty
  /// state; each unreadable one is set aside (renamed `….damaged`) and logged.
  private func restoreNewest(_ layout: DataDirLayout) throws(DataDirRefusal) -> Replica {
    for candidate in layout.startCandidates {
      guard candidate > 0 else { break }
      let name = DataDirFile.snapshot(position: candidate).name
      var bytes: [UInt8]
      do { bytes = try dir.read(name) } catch {
        setAside(name, why: "\(error)")
        continue
      }
      switch DataFileHeader.check(bytes, kind: .snapshot, expected: expectedHeader) {
      case .foreign(let header): throw refusal(header, file: name)
      case .short, .damaged: setAside(name, why: "damaged header")
      case .valid(let header):
        if let body = Self.takeSnapshotBody(&bytes),
          let replica = server.installReplica(seed: header.seed, restoring: body, ownFile: true),
          replica.position == candidate
        {
          seed = header.seed
          return replica
        }
        setAside(name, why: "the snapshot does not read back (checksum or content)")
      }
    }
    seed = try firstSegmentSeed(layout) ?? Crypto.randomBytes(32)
    if !layout.snapshots.isEmpty {
      logger.error("data dir: no snapshot reads back; starting from the empty state and the log that is left")
    }
    guard let replica = server.installReplica(seed: seed, restoring: nil) else {
      throw DataDirRefusal("cannot create the state")
    }
    return replica
  }

  /// A snapshot file's one frame, checked, taken out of `bytes` (emptied): the header
  /// and frame head are cut off in place, as a snapshot may be hundreds of MiB.
  static func takeSnapshotBody(_ bytes: inout [UInt8]) -> [UInt8]? {
    let range: Range<Int>?
    do {
      var reader = DataFileReader(bytes)
      range = reader.next()
    }
    guard let range else { return nil }
    var body: [UInt8] = []
    swap(&body, &bytes)
    guard range.upperBound == body.count else { return Array(body[range]) }
    body.removeSubrange(0..<range.lowerBound)
    return body
  }

  private func firstSegmentSeed(_ layout: DataDirLayout) throws(DataDirRefusal) -> [UInt8]? {
    guard let first = layout.segments.first else { return nil }
    let name = DataDirFile.log(start: first).name
    guard let bytes = try? dir.read(name) else { return nil }
    switch DataFileHeader.check(bytes, kind: .log, expected: expectedHeader) {
    case .valid(let header): return header.seed
    case .foreign(let header): throw refusal(header, file: name)
    case .short, .damaged: return nil
    }
  }

  /// Applies every record after the replica's position, segment by segment. A torn
  /// tail is cut off (a crash mid-write: those records were never answered, §12a);
  /// damage before the end stops the replay there, logged as an error, and what
  /// follows is set aside, never applied out of order.
  private func replay(_ layout: DataDirLayout, into replica: Replica) throws(DataDirRefusal) {
    let segments = layout.segments(after: replica.position)
    var intact = true
    for (i, start) in segments.enumerated() {
      let name = DataDirFile.log(start: start).name
      guard intact else {
        setAside(name, why: "it follows damage or a gap in the log")
        continue
      }
      intact = try replaySegment(name, into: replica, last: i == segments.count - 1)
    }
  }

  /// False when the replay must stop after this segment.
  private func replaySegment(_ name: String, into replica: Replica, last: Bool) throws(DataDirRefusal) -> Bool {
    guard let bytes = try? dir.read(name) else {
      setAside(name, why: "unreadable")
      return false
    }
    switch DataFileHeader.check(bytes, kind: .log, expected: expectedHeader) {
    case .foreign(let header): throw refusal(header, file: name)
    case .short where last:
      dir.remove(name)  // its creation was cut short: it held nothing
      return true
    case .short, .damaged:
      setAside(name, why: "damaged header")
      return false
    case .valid(let header):
      guard header.seed == seed else {
        throw DataDirRefusal("data dir \(config.dir) mixes the files of two data dirs (\(name) has another seed)")
      }
    }
    var reader = DataFileReader(bytes)
    var cut: Int?
    while true {
      let at = reader.offset
      guard let frame = reader.nextRecordFrame() else { break }
      let position = frame.position
      if position <= replica.position { continue }
      guard position == replica.position + 1 else {
        logger.error("data dir: records missing before this one", metadata: ["file": "\(name)", "position": "\(position)"])
        cut = at
        break
      }
      _ = replica.apply(batch: bytes[frame.batch], position: position, timeMs: frame.timeMs)
      stats.replayed += 1
    }
    if let damage = reader.damage { cut = damage.offset }
    guard let cut else { return true }
    return truncate(name, bytes, at: cut, torn: last && reader.damage.map { if case .tornTail = $0 { true } else { false } } == true)
  }

  /// Cuts `name` at `offset`. A torn tail is only logged; damage keeps the bytes cut
  /// off in `name.damaged` for inspection, and stops the replay.
  private func truncate(_ name: String, _ bytes: [UInt8], at offset: Int, torn: Bool) -> Bool {
    if torn {
      logger.warning(
        "data dir: torn last record cut off (a crash mid-write; it was never answered)",
        metadata: ["file": "\(name)", "offset": "\(offset)", "bytes": "\(bytes.count - offset)"])
    } else {
      logger.error(
        "data dir: damaged record; the state ends at the record before it, the rest is kept aside",
        metadata: ["file": "\(name)", "offset": "\(offset)", "aside": "\(name).damaged"])
      try? dir.writeAtomically(name + ".damaged", Array(bytes[offset...]))
    }
    do { try dir.truncate(name, to: offset) } catch {
      logger.error("data dir: cannot cut the file", metadata: ["error": "\(error)"])
    }
    return torn
  }

  func setAside(_ name: String, why: String) {
    logger.error("data dir: file set aside", metadata: ["file": "\(name)", "as": "\(name).damaged", "why": "\(why)"])
    do { try dir.rename(name, to: name + ".damaged") } catch { dir.remove(name) }
  }

  /// The previous process's node(s) leave at its last instant; this one joins now.
  /// A single node's flags may change between restarts (nobody else replays the log
  /// to disagree), so the join carries the rules the state already has.
  private func takeOver(_ replica: Replica) {
    let last = replica.lastRawMs
    for old in replica.nodes.keys.sorted() { record(LogBatch(node: old, inputs: [.leave]), timeMs: last) }
    let nonce = UInt64.random(in: 1...UInt64.max)
    let join = JoinRequest(name: "standalone", nonce: nonce, rules: replica.rules ?? server.clusterRules)
    let applied = record(LogBatch(node: 0, inputs: [.join(join)]))
    number = applied.joined.first(where: { $0.nonce == nonce })?.number ?? 0
    replica.localNode = number
  }
}
