import RelayClusterDriver
import RelayPrimitives
import Testing

/// The append machine driven against a simulated Redis (SimRedis.swift) with faults:
/// slow replies, a connection that dies mid-append, a failover that loses the log's
/// tail, `NOSCRIPT`, short `WAIT`s, stalled replicas and outages longer than the
/// undecided limit (`AppendDriver.undecidedLimitMs`). The invariants are checked
/// after every step; a failure names its seed and step, to be replayed with
/// `AppendSimulation(seed:).run(steps:)`.
@Suite struct AppendSimulationTests {
  @Test func fiftySeeds() {
    for seed in UInt64(1)...50 {
      var sim = AppendSimulation(seed: seed)
      if let failure = sim.run(steps: 600) {
        Issue.record("\(failure) — replay: AppendSimulation(seed: \(seed)).run(steps: 600)")
      }
    }
  }

  /// The seeds meet every fault, and the answers they are about: a run that never
  /// paused or never lost a reply would prove nothing.
  @Test func theSeedsMeetTheFaults() {
    var seen = AppendSimulation.Seen()
    for seed in UInt64(1)...50 {
      var sim = AppendSimulation(seed: seed)
      _ = sim.run(steps: 600)
      seen.add(sim.seen)
    }
    #expect(seen.ok > 1_000 && seen.unavailable > 50, "\(seen)")
    #expect(seen.pauses > 10 && seen.overdue > 0 && seen.failovers > 5 && seen.lostTails > 0, "\(seen)")
    #expect(seen.noScripts > 5 && seen.shortWaits > 2 && seen.relaxedApplies > 0, "\(seen)")
    #expect(seen.lostThenFound > 0 && seen.lostThenUnavailable > 0 && seen.appliedThenLost > 0, "\(seen)")
    #expect(seen.longOutages > 0 && seen.expired > 0, "\(seen)")
  }

  /// The invariants can fail: a machine that answers `unavailable` at every lost
  /// reply (the old behaviour) is caught answering a command twice.
  @Test func theCheckCatchesALateUnavailable() {
    var caught = 0
    for seed in UInt64(1)...50 {
      var sim = AppendSimulation(seed: seed)
      sim.failLostRepliesAtOnce = true
      if sim.run(steps: 600) != nil { caught += 1 }
    }
    #expect(caught > 0)
  }
}

struct AppendSimulation {
  enum Answer: Equatable {
    case ok
    /// `unavailable`; `mayTakeEffect`: when undecided past the limit, where the
    /// record may still count later (docs/cluster.md).
    case unavailable(mayTakeEffect: Bool)
  }

  let seed: UInt64
  let minReplicas: Int
  var random: SeededRandom
  var redis = SimRedis()
  var driver: AppendDriver
  var nowMs: UInt64 = 0
  var deadlines = ReplyDeadlines()
  /// When the sim last heard a reply, and when each awaited request was sent (its
  /// own account, to check the machine's liveness rule against).
  var lastReplyMs: UInt64 = 0
  var sentTimes: [(ms: UInt64, limit: UInt64)] = []
  var up = true
  var downUntilMs: UInt64 = 0
  var applied = 0
  var paused = false
  var slow = false
  /// Redis hangs: its replies come after the reply limit.
  var hanging = false
  var nextToken: AppendDriver.Token = 0
  var nextCommand: UInt16 = 0
  var answers: [UInt16: [Answer]] = [:]
  /// In an `expire` beat (the node's housekeeping), and when the next one is due.
  var inExpire = false
  var nextBeatMs: UInt64 = 250
  var failure: String?
  var step = 0
  /// The old behaviour, for the test that the checks can fail.
  var failLostRepliesAtOnce = false

  /// How often each fault and answer happened (AppendSimulationTests.theSeedsMeetTheFaults).
  struct Seen {
    var ok = 0, unavailable = 0, pauses = 0, overdue = 0, failovers = 0, lostTails = 0
    var noScripts = 0, shortWaits = 0, relaxedApplies = 0
    var lostThenFound = 0, lostThenUnavailable = 0, appliedThenLost = 0
    var longOutages = 0, expired = 0

    mutating func add(_ o: Seen) {
      ok += o.ok; unavailable += o.unavailable; pauses += o.pauses; overdue += o.overdue
      failovers += o.failovers; lostTails += o.lostTails; noScripts += o.noScripts
      shortWaits += o.shortWaits; relaxedApplies += o.relaxedApplies; lostThenFound += o.lostThenFound
      lostThenUnavailable += o.lostThenUnavailable; appliedThenLost += o.appliedThenLost
      longOutages += o.longOutages; expired += o.expired
    }
  }

  var seen = Seen()
  /// Batches whose reply was lost, not yet decided.
  var lostTokens: Set<AppendDriver.Token> = []
  var appliedTokens: Set<AppendDriver.Token> = []

  init(seed: UInt64) {
    self.seed = seed
    random = SeededRandom(seed: seed)
    minReplicas = Int(seed % 3 == 0 ? 0 : 1)
    let policy = ReplicaPolicy(minReplicas: minReplicas, followsFailovers: seed % 2 == 0)
    driver = AppendDriver(
      policy: policy, pipeline: AppendPipeline(highRecords: 6, lowRecords: 2, highBytes: 1 << 20, lowBytes: 1 << 19))
    driver.policy.primary = "p0"
    redis.replicas = seed % 5 == 0 ? [(0, false), (0, false)] : [(0, false)]
  }

  /// Runs `steps` steps with faults, then heals Redis and runs until every command is
  /// answered. Returns the first broken invariant.
  mutating func run(steps: Int) -> String? {
    send(.load, limit: 2_000)
    for s in 0..<steps {
      step = s
      fault()
      tick(maxAdvance: 20)
      if let failure { return "seed \(seed) step \(s): \(failure)" }
    }
    heal()
    for s in steps..<(steps + 3_000) where !allAnswered {
      step = s
      tick(maxAdvance: 50)
      if let failure { return "seed \(seed) step \(s): \(failure)" }
    }
    if !allAnswered {
      let open = answers.filter { $0.value.isEmpty }.keys.sorted()
      return "seed \(seed): commands never answered after healing: \(open.prefix(8))"
    }
    return nil
  }

  private var allAnswered: Bool { answers.values.allSatisfy { !$0.isEmpty } }

  // MARK: One step

  private mutating func tick(maxAdvance: Int) {
    nowMs += UInt64(1 + random.below(maxAdvance))
    if !up, nowMs >= downUntilMs { reconnect() }
    if up, random.below(3) == 0, !paused { submit() }
    if up { deliver() }
    redis.replicate(using: &random)
    if up { read() }
    if up, deadlines.check(nowMs: nowMs, stallMs: 1_000) { declareLost() }
    if nowMs >= nextBeatMs {
      nextBeatMs = nowMs + 250
      inExpire = true
      perform(driver.handle(.expire(nowMs: nowMs)))
      inExpire = false
    }
    if paused != driver.pipeline.isFull { failure = "reading paused \(paused), pipeline full \(driver.pipeline.isFull)" }
  }

  private mutating func fault() {
    switch random.below(400) {
    case 0..<3: lose(redis.disconnect())
    case 3..<5:
      guard !redis.replicas.isEmpty else { return }
      let before = redis.log.count
      lose(redis.failover())
      seen.failovers += 1
      if redis.log.count < before { seen.lostTails += 1 }
      driver.policy.primary = "p\(step)"
    case 5..<8: redis.scriptCached = false
    case 8..<12: slow.toggle()
    case 12..<16:
      if let i = redis.replicas.indices.randomElement(using: &random) { redis.replicas[i].stalled = true }
    case 16..<18:
      for i in redis.replicas.indices { redis.replicas[i].stalled = false }
    case 20..<21: redis.refusing = true
    case 21..<24: redis.refusing = false
    case 24..<26: if redis.replicas.count < 2 { redis.replicas.append((0, false)) }
    case 26..<28: hanging.toggle()
    default: break
    }
  }

  private mutating func heal() {
    slow = false
    hanging = false
    redis.refusing = false
    for i in redis.replicas.indices { redis.replicas[i].stalled = false }
    if redis.replicas.isEmpty { redis.replicas.append((0, false)) }
  }

  // MARK: The node's side

  /// A loop turn's commands (or a beat: equal records) as one batch.
  private mutating func submit() {
    let count = random.below(4)
    var record: [UInt8] = [0xFF]
    for _ in 0..<count {
      nextCommand += 1
      answers[nextCommand] = []
      record += [UInt8(nextCommand >> 8), UInt8(nextCommand & 0xFF)]
    }
    nextToken += 1
    perform(driver.handle(.append(nextToken, record: record)))
  }

  private static func commands(in record: [UInt8]) -> [UInt16] {
    stride(from: 1, to: record.count - 1, by: 2).map { UInt16(record[$0]) << 8 | UInt16(record[$0 + 1]) }
  }

  private mutating func perform(_ effects: [AppendDriver.Effect]) {
    for effect in effects {
      switch effect {
      case .sendAppend(let t, let record, let bySHA): send(.append(t, record, bySHA: bySHA), limit: 2_000)
      case .loadScripts: send(.load, limit: 2_000)
      case .sendWait(let t, let n): send(.wait(t, n), limit: AppendDriver.replicationWaitMs + 2_000)
      case .fail(let t):
        if lostTokens.remove(t) != nil { seen.lostThenUnavailable += 1 }
        if inExpire { seen.expired += 1 }
        // Only a batch undecided past the limit may count after `unavailable`: a short
        // or refused `WAIT` leaves the decision to the reader.
        answer(records.removeValue(forKey: t) ?? [], .unavailable(mayTakeEffect: inExpire))
      case .settled(let t):
        records[t] = nil
        appliedTokens.insert(t)
        if lostTokens.remove(t) != nil { seen.lostThenFound += 1 }
      case .pauseReading:
        if paused || !driver.pipeline.isFull { failure = "paused twice, or while not full" }
        seen.pauses += 1
        paused = true
      case .resumeReading:
        if !paused || driver.pipeline.records > 2 { failure = "resumed above the low mark" }
        paused = false
      case .appendError, .generationLost: break
      }
    }
  }

  /// The record of each batch the machine may still fail, for its commands.
  private var records: [AppendDriver.Token: [UInt8]] = [:]

  private mutating func send(_ request: SimRedis.Request, limit: UInt64) {
    if case .append(let t, let record, _) = request { records[t] = record }
    guard up, redis.connected else {
      if case .append(let t, _, _) = request { return perform(driver.handle(.scriptReply(t, .lost))) }
      if case .wait(let t, _) = request { return perform(driver.handle(.waitReply(t, nil))) }
      return
    }
    let latency = UInt64(hanging ? 2_500 + random.below(2_000) : slow ? 200 + random.below(1_500) : 1 + random.below(30))
    redis.send(request, nowMs: nowMs, latencyMs: latency)
    deadlines.sent(nowMs: nowMs, limitMs: limit)
    sentTimes.append((nowMs, limit))
  }

  private mutating func deliver() {
    for reply in redis.replies(nowMs: nowMs) {
      deadlines.answered(nowMs: nowMs)
      lastReplyMs = nowMs
      sentTimes.removeFirst()
      handle(reply)
    }
  }

  private mutating func handle(_ reply: SimRedis.Reply) {
    switch reply {
    case .script(let t, let r):
      if r == .lost { appliedTokens.contains(t) ? (seen.appliedThenLost += 1) : (_ = lostTokens.insert(t)) }
      if r == .noScript { seen.noScripts += 1 }
      if failLostRepliesAtOnce, r == .lost, let record = records.removeValue(forKey: t) {
        answer(record, .unavailable(mayTakeEffect: false))
      }
      perform(driver.handle(.scriptReply(t, r)))
    case .wait(let t, let a):
      if case .count(let n)? = a, n < Int64(driver.policy.required) { seen.shortWaits += 1 }
      if a == nil { lostTokens.insert(t) }
      perform(driver.handle(.waitReply(t, a)))
    case .loaded: perform(driver.handle(.scriptLoaded))
    }
  }

  private mutating func answer(_ record: [UInt8], _ a: Answer) {
    for c in Self.commands(in: record) {
      if a == .ok { seen.ok += 1 } else { seen.unavailable += 1 }
      let before = answers[c] ?? []
      answers[c] = before + [a]
      if before.contains(.ok) { failure = "command \(c) answered \(a) after ok" }
      if !before.isEmpty, before != [.unavailable(mayTakeEffect: true)] || a != .ok {
        failure = "command \(c) answered twice: \(before + [a])"
      }
    }
  }

  // MARK: Connection loss and the reader

  private mutating func lose(_ lost: [SimRedis.Reply]) {
    guard up else { return }
    up = false
    // Now and then Redis stays away past the undecided limit (a long failover).
    let long = random.below(40) == 0
    if long { seen.longOutages += 1 }
    downUntilMs = nowMs + UInt64(long ? 10_500 + random.below(3_000) : 20 + random.below(700))
    deadlines = ReplyDeadlines()
    sentTimes = []
    for reply in lost { handle(reply) }
  }

  /// The bus is declared lost only when Redis said nothing for the oldest request's limit.
  private mutating func declareLost() {
    guard let oldest = sentTimes.first else { return failure = "declared lost with nothing awaited" }
    if nowMs <= max(oldest.ms, lastReplyMs) + oldest.limit { failure = "declared lost while Redis answered in time" }
    seen.overdue += 1
    lose(redis.disconnect())
  }

  private mutating func reconnect() {
    redis.reconnect()
    up = true
    lastReplyMs = nowMs
    perform(driver.handle(.replicas(Int64(redis.replicas.count))))
    if applied > redis.log.count {
      // The log lacks records this node applied: a new generation (verifyHistory).
      perform(driver.handle(.historyEnded))
      redis.log = []
      for i in redis.replicas.indices { redis.replicas[i].held = 0 }
      applied = 0
    } else {
      perform(driver.handle(.reconnected))
    }
    send(.load, limit: 2_000)
  }

  /// One `XREAD` up to a few records, applied once the replicas asked for hold them.
  private mutating func read() {
    guard applied <= redis.log.count else { return }
    let upTo = min(redis.log.count, applied + 1 + random.below(5))
    if upTo > applied, minReplicas > 0 {
      let held = redis.held(upTo: upTo)
      guard driver.policy.readWait(.count(Int64(held)), probed: true) == .apply else { return }
      if held < minReplicas { seen.relaxedApplies += 1 }
      if held < minReplicas, !(driver.policy.followsFailovers && driver.policy.seen.followedFailover) {
        return failure = "applied with \(held) of \(minReplicas) replicas, no failover followed"
      }
    }
    while applied < upTo {
      let record = redis.log[applied]
      applied += 1
      answer(record, .ok)
      perform(driver.handle(.applied(record: record)))
    }
    if applied == redis.log.count { perform(driver.handle(.caughtUp)) }
  }
}
