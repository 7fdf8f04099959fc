// The run engine: one libuv loop, one tick timer. It ramps connections up,
// drives behaviours at their scenario rates, lets the system go quiet, runs
// the end-of-run checks and closes everything cleanly, each phase bounded in
// time. Single-threaded on purpose: every bot, counter and check is touched
// from the loop thread only, so there are no locks and no data races.

import EventLoop
import RelayPrimitives

final class Engine {
  enum Phase { case ramping, running, settling, closing, finished }

  let ctx: RunContext
  private(set) var bots: [Bot] = []
  private var rooms: [String: [Bot]] = [:]
  private var phase = Phase.ramping
  private var tickTimer: Timer?
  private var progressTimer: Timer?
  private var scheduled = ScheduledActions()
  private var credits: [Double]
  private var nextToConnect = 0
  private var readyOnce = 0
  private var lostDuringRamp = 0
  private var closed = 0
  private var startMs: UInt64 = 0
  private var phaseStartMs: UInt64 = 0
  private var phaseDeadlineMs: UInt64 = 0
  private var lastTickMs: UInt64 = 0
  private(set) var runStartMs: UInt64 = 0
  private(set) var runEndMs: UInt64 = 0
  private(set) var outcome = EndOfRun()
  private static let tickMs = 2
  private static let connectBudgetNs: UInt64 = 20_000_000

  init(ctx: RunContext) {
    self.ctx = ctx
    credits = Array(repeating: 0, count: ctx.scenario.behaviours.count)
    createBots()
  }

  /// This process's share of the population (`--shard K/N` takes every Nth).
  private func createBots() {
    let pop = ctx.scenario.population
    let o = ctx.options
    for i in 0..<pop.total where i % o.shardCount == o.shardIndex {
      let session = pop.sessionPrefix + "-" + String(i / pop.members)
      let bot = Bot(
        index: i, uid: "u" + String(i), isHost: i % pop.members < pop.hosts, session: session,
        ctx: ctx, engine: self)
      bots.append(bot)
      rooms[session, default: []].append(bot)
    }
  }

  /// Runs the whole scenario; returns when the loop stops.
  func run() {
    startMs = ctx.nowMs
    enter(.ramping, deadlineMs: rampBudgetMs())
    let tick = Timer(loop: ctx.loop)
    tick.start(afterMs: 0, repeatMs: UInt64(Self.tickMs)) { [unowned self] in self.tick() }
    tickTimer = tick
    // Sampled every second even when quiet: the peak rate comes from it.
    let p = Timer(loop: ctx.loop)
    p.start(afterMs: 1_000, repeatMs: 1_000) { [unowned self] in self.printProgress() }
    progressTimer = p
    ctx.loop.run()
  }

  /// The scenario's ramp rate is for the whole population: shards share it.
  private var rampPerSecond: Double {
    max(ctx.scenario.rampPerSecond / Double(ctx.options.shardCount), 1)
  }

  private func rampBudgetMs() -> UInt64 {
    // Slack for slow connect() past ~14 000 loopback connections to one
    // address (Linux then probes the other half of the ephemeral port range).
    UInt64(Double(bots.count) / rampPerSecond * 1_000) + 60_000
  }

  private func enter(_ p: Phase, deadlineMs: UInt64) {
    phase = p
    phaseStartMs = ctx.nowMs
    phaseDeadlineMs = ctx.nowMs + deadlineMs
  }

  private func tick() {
    let now = ctx.nowMs
    let dtMs = lastTickMs == 0 ? 0 : now - lastTickMs
    lastTickMs = now
    scheduled.runDue(nowMs: now)
    switch phase {
    case .ramping: ramp(now: now)
    case .running:
      runBehaviours(dtMs: dtMs)
      if now >= runEndMs { beginSettling() }
    case .settling: if isSettled(now: now) || now >= phaseDeadlineMs { beginClosing() }
    case .closing:
      // Wait for the server's TCP closes too (see BotConnection), bounded.
      if (closed >= bots.count && ctx.stats.openSockets <= 0) || now >= phaseDeadlineMs { finish() }
    case .finished: break
    }
  }

  // MARK: ramp-up

  private func ramp(now: UInt64) {
    let elapsed = Double(now - phaseStartMs)
    let target = min(bots.count, Int(elapsed * rampPerSecond / 1_000) + 1)
    // connect() on loopback runs the handshake in the caller and slows down
    // as ephemeral ports fill up (Benchmarks/results/ramp.md). A
    // catch-up burst could then block the loop for seconds, so the relay's
    // hello timeout would fire on bots that cannot answer their 101 in time:
    // spend at most `connectBudgetNs` per tick and catch up over later ticks.
    let started = Loop.hrtimeNs()
    while nextToConnect < target, Loop.hrtimeNs() - started < Self.connectBudgetNs {
      bots[nextToConnect].connect()
      nextToConnect += 1
    }
    if readyOnce + lostDuringRamp >= bots.count {
      // Everyone joined or gave up: no point waiting out the ramp budget.
      if readyOnce == 0 { log("no bot could connect and join; ending the run") }
      beginRunning(durationMs: readyOnce == 0 ? 0 : nil)
      return
    }
    if now >= phaseDeadlineMs {
      ctx.checker.fail(.connection, "ramp-up: only \(readyOnce) of \(bots.count) bots ready in time")
      beginRunning()
    }
  }

  /// A bot finished joining (or upgrading, for broadcast) for the first time.
  func botBecameReady(_ bot: Bot) {
    guard !bot.everReady else { return }
    bot.everReady = true
    readyOnce += 1
    ctx.stats.connectReady.record(ns: Loop.hrtimeNs() &- bot.firstConnectNs)
  }

  private func beginRunning(durationMs: Int? = nil) {
    let duration = durationMs ?? ctx.options.durationMs ?? ctx.scenario.durationMs
    enter(.running, deadlineMs: UInt64(duration))
    runStartMs = ctx.nowMs
    ctx.stats.readyAfterMs = runStartMs - startMs
    runEndMs = runStartMs + UInt64(duration)
    ctx.running = true
    log("all \(readyOnce)/\(bots.count) bots ready after \(runStartMs - startMs) ms; running for \(duration) ms")
    startPublishers()
  }

  private func startPublishers() {
    guard let b = ctx.scenario.behaviours.first(where: { $0.kind == .publish }) else { return }
    for (_, members) in rooms.sorted(by: { $0.key < $1.key }) {
      for bot in members.filter({ !$0.isHost }).prefix(b.publishersPerSession) {
        bot.isPublisher = true
        for _ in 0..<b.inflight { bot.publish() }
      }
    }
  }

  /// A publisher got one of its own messages back: send the next one.
  func publisherMayContinue(_ bot: Bot) {
    guard ctx.running, let b = ctx.scenario.behaviours.first(where: { $0.kind == .publish }) else { return }
    while bot.inflight < b.inflight, bot.isActive { bot.publish() }
  }

  // MARK: behaviours

  /// Each behaviour accrues credit at its total rate; each whole credit is one
  /// action by a random eligible bot (skipped and counted if none is found).
  private func runBehaviours(dtMs: UInt64) {
    for (k, b) in ctx.scenario.behaviours.enumerated() where b.kind != .publish {
      credits[k] += b.perSecond * Double(dtMs) / 1_000
      while credits[k] >= 1 {
        credits[k] -= 1
        if !performOnRandomBot(b) { ctx.stats.behaviourSkips += 1 }
      }
    }
  }

  private func performOnRandomBot(_ b: Behaviour) -> Bool {
    for _ in 0..<12 {
      let bot = bots[ctx.random.below(bots.count)]
      guard bot.isActive else { continue }
      if perform(b, bot) { return true }
    }
    return false
  }

  private func perform(_ b: Behaviour, _ bot: Bot) -> Bool {
    switch b.kind {
    case .hand: return ctx.options.wire == .relay && bot.toggleHand()
    case .hostLower: return ctx.options.wire == .relay && bot.hostLower()
    case .message: return bot.sendMessage()
    case .publish: return false
    case .churn: return ctx.options.wire == .relay && bot.leaveForAWhile(afterMs: b.afterMs)
    case .vanish: return ctx.options.wire == .relay && bot.vanish(after: b)
    case .abrupt: return ctx.options.wire == .relay && bot.dropAbruptly(after: b)
    case .background: return ctx.options.wire == .relay && bot.goBackground(after: b)
    case .ring: return ctx.options.wire == .relay && bot.placeCall(b)
    }
  }

  func schedule(afterMs: Int, _ action: @escaping () -> Void) {
    scheduled.add(dueMs: ctx.nowMs + UInt64(max(0, afterMs)), action)
  }

  /// Up to `count` distinct other active members of the bot's session.
  func randomPeers(of bot: Bot, count: Int) -> [String] {
    let members = rooms[bot.session] ?? []
    var picked: [String] = []
    for _ in 0..<(count * 4) where picked.count < count {
      let peer = members[ctx.random.below(members.count)]
      if peer !== bot, peer.isActive, !picked.contains(peer.uid) { picked.append(peer.uid) }
    }
    return picked
  }

  /// Broadcast rooms: deliveries a send should cause (sender included).
  func readyMembers(of session: String) -> Int {
    (rooms[session] ?? []).reduce(0) { $0 + ($1.phase == .ready ? 1 : 0) }
  }

  /// A connection ended unexpectedly: the bot is out for the rest of the run.
  func botLost(_ bot: Bot) {
    bot.phase = .done
    if phase == .ramping, !bot.everReady { lostDuringRamp += 1 }
  }

  func botClosed(_ bot: Bot) { closed += 1 }

  /// Dropped bots come back until the end-of-run close begins.
  var acceptsReconnects: Bool { phase == .ramping || phase == .running || phase == .settling }

  // MARK: settling, checks, closing

  private func beginSettling() {
    ctx.running = false
    let longestWait = UInt64(scheduled.latestDueMs(after: ctx.nowMs))
    // Generous: a run that overloaded the server (or the bots) still drains
    // and gets checked; the quiet test ends it as soon as traffic stops.
    enter(.settling, deadlineMs: longestWait + UInt64(ctx.scenario.quietMs) + 60_000)
    log("run over; settling (quiet \(ctx.scenario.quietMs) ms)")
  }

  /// Quiet: nothing scheduled, nobody connecting or waiting for a reply, and
  /// no message received for `quietMs`.
  private func isSettled(now: UInt64) -> Bool {
    guard scheduled.isEmpty, now - ctx.lastEventMs >= UInt64(ctx.scenario.quietMs) else { return false }
    return !bots.contains { $0.phase == .connecting || !$0.pending.isEmpty || $0.resuming }
  }

  private func beginClosing() {
    if !isSettled(now: ctx.nowMs) {
      let connecting = bots.filter { $0.phase == .connecting }.count
      let waiting = bots.filter { !$0.pending.isEmpty }.count
      let resuming = bots.filter(\.resuming).count
      ctx.checker.fail(
        .connection,
        "did not settle in time (\(connecting) connecting, \(waiting) awaiting replies, \(resuming) resuming, "
          + "\(scheduled.isEmpty ? "nothing" : "actions") scheduled); checked anyway")
    }
    outcome = EndOfRunChecks(ctx: ctx, bots: bots, rooms: rooms).evaluate()
    enter(.closing, deadlineMs: 5_000)
    for bot in bots { bot.closeCleanly() }
  }

  private func finish() {
    guard phase != .finished else { return }
    phase = .finished
    tickTimer?.stop()
    tickTimer?.close()
    progressTimer?.stop()
    progressTimer?.close()
    for bot in bots where bot.phase != .done { bot.conn?.abandon() }
    ctx.loop.stop()
  }

  private func printProgress() {
    let now = ctx.nowMs
    let line = ctx.stats.progressLine(
      nowMs: now, elapsedMs: now - startMs, total: bots.count, failures: ctx.checker.totalFailures)
    if ctx.options.progress { log(line) }
  }
}

/// Progress and phase lines go to stderr; stdout is for the report.
func log(_ line: String) {
  var text = line
  text += "\n"
  FileOutput.standardError.write(text)
}

/// Actions due at a loop time, kept sorted by due time (few at once: resumes,
/// rejoins, call answers), run from the tick.
struct ScheduledActions {
  private var items: [(dueMs: UInt64, action: () -> Void)] = []

  var isEmpty: Bool { items.isEmpty }

  mutating func add(dueMs: UInt64, _ action: @escaping () -> Void) {
    var lo = 0
    var hi = items.count
    while lo < hi {
      let mid = (lo + hi) / 2
      if items[mid].dueMs <= dueMs { lo = mid + 1 } else { hi = mid }
    }
    items.insert((dueMs, action), at: lo)
  }

  mutating func runDue(nowMs: UInt64) {
    var n = 0
    while n < items.count, items[n].dueMs <= nowMs { n += 1 }
    guard n > 0 else { return }
    let due = items.prefix(n)
    items.removeFirst(n)
    for item in due { item.action() }
  }

  func latestDueMs(after nowMs: UInt64) -> Int {
    guard let last = items.last else { return 0 }
    return last.dueMs > nowMs ? Int(last.dueMs - nowMs) : 0
  }
}
