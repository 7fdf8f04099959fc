import EventLoop
import RelayCluster
import RelayClusterDriver
import RelayCore
import RelayCrypto
import RelayPrimitives
import Logging

// Snapshots, divergence and hand-over (docs/cluster.md, "Bounded history"): at the
// positions the replica names, every node serializes its state and logs a digest;
// the ticker stores its snapshot in Redis and trims the log behind the previous one.
// A node starts from the newest snapshot and reads only the tail after it.
extension ClusterNode {
  /// Loads the generation's newest snapshot (or starts from an empty state when the
  /// log has none) and reads the log after it.
  func loadSnapshot(_ g: String) {
    let read = [Array("EVAL".utf8), Self.readSnapshotSource, Array("2".utf8), Self.key("snapshot", g)]
    commands?.send(read + [Self.key("snapshot-bytes", g)], limitMs: 30_000) { [weak self] reply in
      guard let self, self.generation == g else { return }
      guard case .array(let items?)? = reply, items.count == 4 else { return self.dropConnections() }
      guard let bytes = items[3].bytes else {
        self.host.installReplica(seed: Array(g.utf8), restoring: nil, ownFile: false)
        return self.step(.snapshotLoaded(lastId: "0"))
      }
      let digest = Self.digest(bytes)
      guard let pos = items[0].string.flatMap(UInt64.init), pos > 0, let id = items[1].string,
        items[2].string == Crypto.hex(digest),
        let replica = self.host.installReplica(seed: Array(g.utf8), restoring: bytes, ownFile: false), replica.position == pos
      else { return self.step(.generationUnusable) }
      replica.noteLocalDigest(digest, at: pos)
      self.stats.snapshotLoads += 1
      self.step(.snapshotLoaded(lastId: id))
    }
  }

  /// Reads a snapshot's fields and bytes in one script, so that a swap in between
  /// (SnapshotStore) cannot pair one snapshot's digest with another's bytes. The
  /// bytes are in the hash when a hand-over wrote them, in their own key otherwise.
  static let readSnapshotSource = Array(
    """
    local h = redis.call('HMGET', KEYS[1], 'pos', 'id', 'digest', 'bytes')
    if not h[4] then h[4] = redis.call('GET', KEYS[2]) end
    return h
    """.utf8)

  /// The digest of a snapshot recorded in the log: the first 16 bytes of its SHA-256.
  static func digest(_ bytes: [UInt8]) -> [UInt8] { Array(Crypto.sha256(bytes).prefix(16)) }

  /// Every replica snapshots at the same position; the ticker stores its snapshot
  /// (and trims the log), the others log their digest for comparison. On the loop
  /// only the skeleton is written (replay logs are captured, not visited); writing
  /// them and digesting run on the thread pool, storing in chunks (SnapshotStore).
  /// One at a time; which wait and which are superseded is `SnapshotQueue`'s rule.
  func snapshotDue(at position: UInt64, id: String) {
    guard let replica = host.replica, let g = generation else { return }
    let (started, startedCpu) = (Loop.hrtimeNs(), Loop.threadCpuNs())
    let capture = SnapshotCapture(
      parts: Handoff(replica.snapshotParts()), position: position, id: id, epoch: readEpoch, generation: g,
      replica: replica)
    stats.noteCapture(wallNs: Loop.hrtimeNs() &- started, cpuNs: Loop.threadCpuNs() &- startedCpu)
    let decision = snapshots.due(capture)
    for superseded in decision.drop { host.loop.release(superseded.parts) }
    stats.snapshotsSuperseded = snapshots.superseded
    if let now = decision.make { process(now) }
  }

  private func process(_ capture: SnapshotCapture) {
    let parts = capture.parts
    host.loop.offload({ Self.joinAndDigest(parts) }) { [weak self] done in
      guard let self else { return }
      self.stats.snapshotNs = done.ns
      let snapshot = SnapshotStore(
        pieces: done.pieces.take() ?? [], digest: done.digest, position: capture.position, id: capture.id)
      guard let replica = capture.replica, self.host.replica === replica, self.readEpoch == capture.epoch,
        self.generation == capture.generation
      else { return self.storeFinished(snapshot) }
      self.snapshotReady(snapshot, replica, capture.generation)
    }
  }

  /// The snapshot on its way is stored, abandoned or only digested: the waiting one goes.
  func snapshotFinished() {
    if let next = snapshots.finished() { process(next) }
  }

  /// Done with `snapshot`: its pieces are freed on the thread pool (hundreds of
  /// megabytes at a large state), and the waiting snapshot goes.
  func storeFinished(_ snapshot: SnapshotStore) {
    host.loop.release(snapshot.takePieces())
    snapshotFinished()
  }

  /// Off the loop: the snapshot's bytes in upload pieces (never joined into one
  /// array), their digest, and how long both took. The parts are taken out of their
  /// box here, so what only they still hold (replay chunks the log dropped since the
  /// capture) is freed on this thread too.
  private static func joinAndDigest(_ box: Handoff<SnapshotParts>) -> SnapshotJoined {
    let started = Loop.hrtimeNs()
    let pieces = box.take()?.joined(pieceBytes: SnapshotStore.chunkBytes) ?? []
    let digest = Array(Crypto.sha256(pieces: pieces).prefix(16))
    return SnapshotJoined(pieces: Handoff(pieces), digest: digest, ns: Loop.hrtimeNs() &- started)
  }

  private func snapshotReady(_ snapshot: SnapshotStore, _ replica: Replica, _ g: String) {
    if replica.noteLocalDigest(snapshot.digest, at: snapshot.position) {
      snapshots.dropWaiting().forEach { host.loop.release($0.parts) }
      storeFinished(snapshot)
      return step(.diverged(position: snapshot.position))
    }
    switch lifecycle.snapshotDuty(isTicker: replica.ticker == number) {
    case .none: storeFinished(snapshot)
    case .logDigest:
      append(.digest(position: snapshot.position, digest: snapshot.digest, stored: false))
      storeFinished(snapshot)
    case .store:
      stats.snapshotBytes = UInt64(snapshot.count)
      store(snapshot, generation: g)
    }
  }

  /// The log lost records this replica needs (NodeLifecycle decides what follows
  /// from the stored snapshot's position): asks Redis for it.
  func askStoredPosition(reason: String) {
    guard let g = generation else { return }
    let mine = host.replica?.position ?? 0
    commands?.send([Array("HGET".utf8), Self.key("snapshot", g), Array("pos".utf8)]) { [weak self] reply in
      guard let self, self.generation == g else { return }
      let stored = reply?.string.flatMap(UInt64.init) ?? 0
      self.step(.storedPosition(stored: stored, mine: mine, reason: reason))
    }
  }

  // MARK: Rolling upgrades

  /// The generation was handed over to a newer rules version: this node's clients
  /// reconnect to the new nodes and resume there. The node that was the ticker
  /// stores the state as the first snapshot of the successor generation.
  func handedOver(to rules: UInt32, handoffBy: UInt32?, raw: RawRecord) {
    logger.warning("the cluster is upgrading to rules version \(rules): this node steps down")
    host.closeAllWebSockets(code: CloseCode.serviceRestart, reason: "cluster upgrading")
    guard handoffBy == number, number != 0, let replica = host.replica, let g = generation else {
      return host.superseded()
    }
    let fresh = Crypto.hex(Crypto.randomBytes(32))
    let bytes = replica.snapshot(successorRules: rules)
    let digest = Self.digest(bytes)
    let r = host.clusterRules
    let meta = "\(r.format) \(rules) \(Crypto.hex(r.configDigest))"
    var keys = [Self.generationKey] + ["meta", "seq", "snapshot", "log"].map { Self.key($0, fresh) }
    keys += ["meta", "seq", "log", "snapshot", "snapshot-bytes"].map { Self.key($0, g) }
    let args = [g, fresh, meta, String(replica.position), Crypto.hex(digest)].map { Array($0.utf8) } + [bytes]
    run(.handoff, keys: keys, args: args) { [weak self] reply in
      self?.logger.info("cluster state handed over", metadata: ["reply": "\(reply?.string ?? "none")"])
      self?.host.superseded()
    }
  }

  /// A node of a newer rules version meets an older generation: it asks for the
  /// hand-over, then waits for the generation to change.
  func requestUpgrade(generation g: String) {
    logger.warning("the cluster runs an older rules version: asking it to hand over")
    loadScripts()
    appendNow(.upgrade(rules: host.clusterRules.rules), node: 0, generation: g)
    reconnectTimer?.start(afterMs: 500) { [weak self] in self?.dropConnections() }
  }
}
