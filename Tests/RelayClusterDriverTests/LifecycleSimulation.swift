import RelayClusterDriver
import RelayPrimitives

/// Drives several `NodeLifecycle` machines against one `LogModel` with faults: read
/// replies delivered late and out of order (from an older epoch too), connections
/// lost (mid-join as well), failovers that lose the log's unreplicated tail, nodes
/// declared dead, and the log trimmed past a lagging node. Checks the invariants at
/// every step; a failure names its seed and step.
struct LifecycleSimulation {
  struct Seen {
    var readies = 0, reconnectedReadies = 0, staleDropped = 0, rebuilds = 0, replacements = 0
    var deaths = 0, stores = 0, digests = 0, lostJoins = 0, failovers = 0, holes = 0, divergences = 0
    var abandonedUploads = 0, failedUploads = 0

    mutating func add(_ o: Seen) {
      readies += o.readies; reconnectedReadies += o.reconnectedReadies; staleDropped += o.staleDropped
      rebuilds += o.rebuilds; replacements += o.replacements; deaths += o.deaths; stores += o.stores
      digests += o.digests; lostJoins += o.lostJoins; failovers += o.failovers; holes += o.holes
      divergences += o.divergences; abandonedUploads += o.abandonedUploads; failedUploads += o.failedUploads
    }
  }

  var world = LogModel()
  var nodes: [SimNode]
  var random: SeededRandom
  var seen = Seen()
  var failure: String?
  /// Which node stored the snapshot at each (generation, position).
  var storers: [String: Int] = [:]
  /// Rule switches, to show that the checks catch a broken adapter.
  var ignoreEpochs = false
  var uploadRegardless = false
  var trace = false

  init(seed: UInt64, nodes count: Int = 3) {
    random = SeededRandom(seed: seed)
    nodes = (0..<count).map { SimNode(seed: seed &* 31 &+ UInt64($0)) }
  }

  /// Runs `steps` faulty steps, then quiet ones until every node is ready again.
  /// Returns the first broken invariant, if any.
  mutating func run(steps: Int) -> String? {
    for i in nodes.indices { execute(i, nodes[i].machine.handle(.connect)) }
    for n in 0..<steps {
      faultyStep()
      if let failure { return "step \(n): \(failure)" }
    }
    for _ in 0..<4_000 {
      world.replicated = world.nextSeq - 1
      deliver(Int(random.next() % UInt64(nodes.count)))
      if let failure { return "quiet: \(failure)" }
      if nodes.allSatisfy({ $0.machine.state == .ready }) { break }
    }
    return settled()
  }

  /// After the quiet phase: every node ready in the current generation, numbers unique.
  func settled() -> String? {
    for (i, node) in nodes.enumerated() where node.machine.state != .ready || node.machine.generation != world.generation {
      return "node \(i) never became ready again: \(node.machine.state), pending join \(node.machine.pendingJoin.map { "\($0)" } ?? "none")"
    }
    let numbers = Set(nodes.map(\.machine.number))
    return numbers.count == nodes.count ? nil : "numbers not unique: \(nodes.map(\.machine.number))"
  }

  mutating func faultyStep() {
    let i = Int(random.next() % UInt64(nodes.count))
    switch random.next() % 100 {
    case 0..<50: deliver(i)
    case 50..<62:
      if nodes[i].machine.mayAppend { world.append(.input) }
    case 62..<72:
      for j in nodes.indices {
        nodes[j].nowMs += 50 + random.next() % 300
        let n = nodes[j]
        execute(j, nodes[j].machine.handle(.housekeep(nowMs: n.nowMs, lastAppendMs: n.lastAppendMs, unloggedCloses: 0)))
      }
    case 72..<82: world.replicated = min(world.nextSeq - 1, world.replicated + random.next() % 4)
    case 82..<88: lose(i)
    case 88..<90:
      // A failover loses the log's tail, not its head (docs/cluster.md): LogHistory
      // cannot tell a log lost whole from one trimmed behind a snapshot.
      guard let first = world.log.first, world.replicated >= first.seq else { return }
      seen.failovers += 1
      world.failover()
      for j in nodes.indices { lose(j) }
    case 90..<94:
      guard let replica = nodes[i].replica, let victim = replica.nodes.sorted().randomElement(using: &random) else { return }
      world.append(.death(victim))
    case 94..<96:
      // Its digest disagrees with the stored snapshot's: it rebuilds while its read is out.
      guard let replica = nodes[i].replica, nodes[i].machine.state == .ready else { return }
      seen.divergences += 1
      execute(i, nodes[i].machine.handle(.diverged(position: replica.position)))
    default: deliver(i)
    }
  }

  mutating func lose(_ i: Int) {
    execute(i, nodes[i].machine.handle(.redisLost(leaving: false)))
  }

  /// Delivers one of node `i`'s awaited replies, not necessarily the oldest.
  mutating func deliver(_ i: Int) {
    guard !nodes[i].pending.isEmpty else { return }
    let pick = nodes[i].pending.remove(at: Int(random.next() % UInt64(nodes[i].pending.count)))
    let m = nodes[i].machine
    if trace { print("deliver \(i) \(pick) log \(world.log.map(\.id)) repl \(world.replicated)") }
    switch pick {
    case .read(let read): readReply(i, read)
    case .enter: execute(i, nodes[i].machine.handle(.enter(generation: world.generation, hasReplica: nodes[i].replica != nil)))
    case .verify(let mine):
      let found = world.log.first { $0.id == mine }?.id
      let check = LogHistory.check(lastApplied: mine, found: found, first: world.log.first?.id)
      execute(i, nodes[i].machine.handle(.historyChecked(check)))
    case .loadSnapshot(let g):
      guard g == world.generation else { return lose(i) }
      nodes[i].replica = world.snapshot?.state ?? LogModel.Replica()
      execute(i, nodes[i].machine.handle(.snapshotLoaded(lastId: world.snapshot?.record.id ?? "0")))
    case .storedPosition(let reason, let mine):
      let stored = m.generation == world.generation ? world.snapshot?.record.seq ?? 0 : 0
      execute(i, nodes[i].machine.handle(.storedPosition(stored: stored, mine: mine, reason: reason)))
    case .reconnect: execute(i, nodes[i].machine.handle(.connect))
    case .upload(let upload): uploadReply(i, upload)
    }
  }

  mutating func readReply(_ i: Int, _ read: SimNode.Read) {
    let records = world.read(read.generation, after: read.lastId, count: NodeLifecycle.readCount)
    for record in records {
      guard ignoreEpochs || nodes[i].machine.reading(read.generation, read.epoch) else {
        seen.staleDropped += 1
        return
      }
      applyRecord(i, record, epoch: ignoreEpochs ? nodes[i].machine.readEpoch : read.epoch)
      if failure != nil { return }
    }
    guard nodes[i].machine.reading(read.generation, read.epoch) else { return }
    if records.count < NodeLifecycle.readCount { nodes[i].caughtUpEpoch = read.epoch }
    execute(i, nodes[i].machine.handle(.readEnded(epoch: read.epoch, count: records.count, nodes[i].view)))
  }

  mutating func applyRecord(_ i: Int, _ record: LogModel.Record, epoch: UInt64) {
    let before = nodes[i].machine.lastId
    guard var replica = nodes[i].replica else {
      return execute(i, nodes[i].machine.handle(.applied(id: record.id, epoch: epoch, .init())))
    }
    guard let outcome = LogModel.apply(record, to: &replica, number: nodes[i].machine.number) else {
      failure = "node \(i) applied position \(record.seq) twice (replica at \(replica.position))"
      return
    }
    if outcome.lostRecords {
      seen.holes += 1
      let next = replica.position + 1
      if nodes[i].machine.generation == world.generation, world.log.contains(where: { $0.seq == next }) {
        failure = "node \(i) skipped position \(next), which the log still holds"
        return
      }
    }
    nodes[i].replica = replica
    execute(i, nodes[i].machine.handle(.applied(id: record.id, epoch: epoch, outcome)))
    if nodes[i].machine.lastId != before, LogModel.key(nodes[i].machine.lastId) <= LogModel.key(before) {
      failure = "node \(i): lastId went back from \(before) to \(nodes[i].machine.lastId)"
    }
  }
}

extension LifecycleSimulation {
  /// Node `i`'s adapter: the machine's actions against the model.
  mutating func execute(_ i: Int, _ actions: [NodeLifecycle.Action]) {
    if actions.contains(.declaredDead) {
      seen.deaths += 1
      let closes = actions.contains(.closeSockets(reason: "node rejoining the cluster"))
      let rejoins = actions.contains { if case .join = $0 { return true } else { return false } }
      if !closes || !rejoins { failure = "node \(i) declared dead without closing its sockets and rejoining: \(actions)" }
    }
    if trace { print("node \(i) [\(nodes[i].machine.state) e\(nodes[i].machine.readEpoch) \(nodes[i].machine.lastId)] \(actions)") }
    for action in actions { perform(i, action) }
  }

  private mutating func perform(_ i: Int, _ action: NodeLifecycle.Action) {
    if nodes[i].machine.state == .down, action.needsRedis { return }  // no connection: nothing is sent
    switch action {
    case .openConnections: nodes[i].pending.append(.enter)
    case .verifyHistory(let mine): nodes[i].pending.append(.verify(mine))
    case .loadSnapshot(let g): nodes[i].pending.append(.loadSnapshot(g))
    case .read(let g, let epoch, let from):
      if from != nodes[i].machine.lastId { failure = "node \(i) reads from \(from), not its last id" }
      nodes[i].pending.append(.read(.init(generation: g, epoch: epoch, lastId: from)))
    case .join(let nonce):
      nodes[i].sentJoins.append(nonce)
      switch random.next() % 8 {
      case 0:
        seen.lostJoins += 1  // Redis lost before the join was stored
        lose(i)
      case 1:
        world.append(.join(nonce: nonce))
        lose(i)  // stored, the reply lost: the reader finds it, unless a failover lost it
      default: world.append(.join(nonce: nonce))
      }
    case .driver(.caughtUp):
      // The append machine decides a batch whose reply was lost when the reader
      // reaches the log's end: read back, it was answered; not in the log, it fails.
      let unsettled = nodes[i].unsettledJoins
      nodes[i].unsettledJoins = []
      for nonce in unsettled where !world.log.contains(where: { $0.kind == .join(nonce: nonce) }) {
        execute(i, nodes[i].machine.handle(.joinFailed(nonce: nonce)))
      }
    case .ready(let reconnected): ready(i, reconnected: reconnected)
    case .closeSockets: nodes[i].closedSockets += 1
    case .fatal(let reason): failure = "node \(i) fatal: \(reason)"
    case .snapshotDue(let position, let id): snapshotDue(i, position, id)
    case .askStoredPosition(let reason):
      nodes[i].pending.append(.storedPosition(reason, mine: nodes[i].replica?.position ?? 0))
    case .rebuilding: seen.rebuilds += 1
    case .replaceGeneration(let old, _):
      seen.replacements += 1
      world.replace(old)
      for j in nodes.indices where j != i { lose(j) }
      nodes[i].pending.append(.enter)  // the bootstrap on the same connection founds the new one
    case .beat, .tick:
      guard nodes[i].machine.mayAppend else { return }
      world.append(.input)
      nodes[i].lastAppendMs = nodes[i].nowMs
    case .armTick: nodes[i].tickArmed = true
    case .stopTick: nodes[i].tickArmed = false
    case .busLost:
      nodes[i].pending.removeAll()
      nodes[i].unsettledJoins += nodes[i].sentJoins  // rechecked at the next end of the log
      nodes[i].sentJoins = []
    case .reconnect: nodes[i].pending.append(.reconnect)
    case .cancelReconnect: nodes[i].pending.removeAll { $0 == .reconnect }
    case .driver, .resetNotice, .dropUnloggedCloses, .retryUnloggedCloses, .setLocalNode, .joined, .declaredDead,
      .divergedNotice, .handOver:
      break
    }
  }

  /// Ready only once joined, and (the first time) once a read reached the log's end.
  private mutating func ready(_ i: Int, reconnected: Bool) {
    let m = nodes[i].machine
    if m.number == 0 || m.pendingJoin != nil { failure = "node \(i) ready without a number" }
    if !reconnected && nodes[i].caughtUpEpoch != m.readEpoch { failure = "node \(i) ready before it caught up" }
    if reconnected { seen.reconnectedReadies += 1 } else { seen.readies += 1 }
  }

  /// Only the ticker stores (and so trims); the others log their digest.
  private mutating func snapshotDue(_ i: Int, _ position: UInt64, _ id: String) {
    guard let replica = nodes[i].replica, let g = nodes[i].machine.generation else { return }
    switch nodes[i].machine.snapshotDuty(isTicker: nodes[i].isTicker) {
    case .none: return
    case .logDigest: seen.digests += 1
    case .store:
      let key = "\(g)@\(position)"
      if let other = storers[key], other != i { failure = "nodes \(other) and \(i) both stored the snapshot at \(key)" }
      storers[key] = i
      var upload = SnapshotUpload(pieces: 1 + Int(random.next() % 2))
      let step = upload.start(mayStore: mayStore(i, g))
      uploadStep(i, .init(machine: upload, generation: g, id: id, state: replica), step)
    }
  }

  private func mayStore(_ i: Int, _ g: String) -> Bool { uploadRegardless || nodes[i].mayStore(g) }

  /// The upload's next command is sent.
  private mutating func uploadStep(_ i: Int, _ upload: SimNode.Upload, _ step: SnapshotUpload.Step) {
    switch step {
    case .finished(.stored): seen.stores += 1
    case .finished(.abandoned): seen.abandonedUploads += 1
    case .finished(.failed), .finished(.short): seen.failedUploads += 1
    case .finished(.superseded): break
    case .swap where !nodes[i].mayStore(upload.generation):
      failure = "node \(i) sent the swap of a snapshot while not ready in \(upload.generation)"
    case .set, .append, .swap:
      // Mostly answered at once, as Redis answers one piece; else among the node's replies.
      if random.next() % 4 != 0 { return uploadReply(i, upload) }
      nodes[i].pending.append(.upload(upload))
    }
  }

  /// Redis answers the awaited command: a piece is staged (or refused, as at `OOM`);
  /// the swap script stores only into its own generation, and only a newer snapshot.
  private mutating func uploadReply(_ i: Int, _ upload: SimNode.Upload) {
    var upload = upload
    let reply: SnapshotUpload.Reply
    if upload.machine.awaiting == .swap {
      reply = swap(upload)
    } else {
      reply = random.next() % 16 == 0 ? .refused : .staged
    }
    let step = upload.machine.handle(reply, mayStore: mayStore(i, upload.generation))
    uploadStep(i, upload, step)
  }

  private mutating func swap(_ upload: SimNode.Upload) -> SnapshotUpload.Reply {
    guard upload.generation == world.generation, let record = world.log.first(where: { $0.id == upload.id }) else {
      return .refused
    }
    guard world.store(record, upload.state) else { return .old }
    if let first = world.log.first, let stored = world.snapshot, first.seq > stored.record.seq + 1 {
      failure = "the log was trimmed past the stored snapshot"
    }
    return .swapped
  }
}

extension NodeLifecycle.Action {
  /// Sent on a connection to Redis (lost with it).
  var needsRedis: Bool {
    switch self {
    case .verifyHistory, .loadSnapshot, .read, .join, .askStoredPosition, .beat, .tick: true
    default: false
    }
  }
}
