import EventLoop
package import RelayCluster
import RelayClusterDriver
import RelayCore
import Logging

// Appending to the log (docs/cluster.md, "The log"): everything a node logs during
// one loop turn goes to Redis as one record through one script, which checks the
// generation, counts the position and stamps Redis's time. A node whose appends fail
// for any reason is not ready until one succeeds again.
extension ClusterNode {
  /// Logs one input of this node. `failed` runs if it cannot be logged (no bus, an
  /// error from Redis, or the generation changed under it); the caller answers
  /// `unavailable`. A socket close that cannot be logged is kept and retried.
  package func append(_ input: LogInput, failed: (() -> Void)? = nil) {
    guard state == .ready || state == .catchingUp, number != 0, generation != nil, commands != nil else {
      if case .closed = input, number != 0 { unloggedCloses.append(input) }
      failed?()
      return
    }
    lastAppendMs = host.loop.nowMs
    if batch.isEmpty { flushTimer?.start(afterMs: 0) { [unowned self] in self.flushBatch() } }
    batch.append((input, failed))
    batchBytes += Self.weight(input)
    // A turn's batch leaves in records of bounded size (docs/cluster.md, "The log"):
    // the pipeline then counts it as it grows, and past its high mark the server
    // keeps the turn's next reads (InputLog.isBackedUp).
    if batchBytes >= AppendPipeline.recordBytes { flushBatch() }
  }

  /// About an input's bytes in a record.
  private static func weight(_ input: LogInput) -> Int {
    if case .text(_, let payload) = input { return 16 + payload.count }
    return 16
  }

  /// Everything this node logged during a loop turn goes to Redis as one record (one
  /// script call), not one per input: the log's throughput is then Redis round trips
  /// per turn, not per message.
  func flushBatch() {
    let entries = batch
    batch = []
    batchBytes = 0
    guard !entries.isEmpty else { return }
    guard generation != nil, commands != nil, number != 0 else { return failBatch(entries) }
    stats.appends += UInt64(entries.count)
    send(LogBatch(node: number, inputs: entries.map(\.input)), entries)
  }

  /// A record of its own, sent now (a join, logged with node 0 before a number exists).
  func appendNow(_ input: LogInput, node: UInt32, generation g: String? = nil) {
    send(LogBatch(node: node, inputs: [input]), [(input, nil)], generation: g)
  }

  /// Hands one batch to the append machine (AppendDriver), which decides what to send
  /// and who is answered how; this adapter keeps the batch's callers until then.
  func send(_ batch: LogBatch, _ entries: [PendingAppend], generation: String? = nil) {
    guard let g = generation ?? self.generation else { return failBatch(entries) }
    nextAppend += 1
    sentAppends[nextAppend] = SentAppend(entries: entries, generation: g)
    perform(driver.handle(.append(nextAppend, record: batch.encoded())))
  }

  /// Applies the append machine's effects.
  func perform(_ effects: [AppendDriver.Effect]) {
    for effect in effects {
      switch effect {
      case .sendAppend(let t, let record, let bySHA): sendAppend(t, record, bySHA: bySHA)
      case .loadScripts: loadScripts()
      case .sendWait(let t, let n): sendWait(t, replicas: n)
      case .fail(let t): failBatch(sentAppends.removeValue(forKey: t)?.entries ?? [])
      case .settled(let t): sentAppends[t] = nil
      case .pauseReading: break  // the server asks `isBackedUp` before each read
      case .resumeReading: host.inputsDrained()
      case .appendError(let message): appendFailed(message)
      case .generationLost(let message): generationLost(message)
      }
    }
  }

  private func sendAppend(_ t: UInt64, _ record: [UInt8], bySHA: Bool) {
    guard let g = sentAppends[t]?.generation else { return }
    let keys = [Self.generationKey, Self.key("seq", g), Self.key("log", g)]
    run(.append, keys: keys, args: [Array(g.utf8), record], bySHA: bySHA) { [weak self] reply in
      guard let self else { return }
      if case .error(let message)? = reply, message.hasPrefix("NOSCRIPT") { self.scriptSHAs[.append] = nil }
      self.perform(self.driver.handle(.scriptReply(t, AppendDriver.ScriptReply(reply))))
    }
  }

  /// `WAIT N deadline` after a stored append: how many replicas hold this connection's writes.
  private func sendWait(_ t: UInt64, replicas n: Int) {
    guard let commands else { return perform(driver.handle(.waitReply(t, nil))) }
    waitForReplicas(n, on: commands) { [weak self] reply in
      guard let self else { return }
      self.perform(self.driver.handle(.waitReply(t, WaitAnswer(reply))))
    }
  }

  /// A script's reply for a record it appended outside the append machine (a stored
  /// snapshot's digest record): handled as an append's would be.
  func appended(_ reply: RESPValue?, _ entries: [PendingAppend]) {
    switch AppendDriver.ScriptReply(reply) {
    case .stored:
      driver.failing = false
    case .reset(let message):
      failBatch(entries)
      generationLost(message)
    case .error(let message):
      failBatch(entries)
      appendFailed(message)
    case .noScript:
      failBatch(entries)
      appendFailed("NOSCRIPT")
    case .lost:
      failBatch(entries)
      appendFailed("no reply (connection lost or timed out)")
    }
  }

  /// Not ready until an append succeeds again; Redis's words logged, rate-limited.
  func appendFailed(_ message: String) {
    driver.failing = true
    noteRedisError(message)
    let (log, held) = appendErrorLog.admit(nowMs: host.loop.nowMs)
    if log {
      logger.error(
        "cluster append failed", metadata: ["redis": "\(message)", "node": "\(config.nodeId)", "held": "\(held)"])
    }
  }

  /// The appends of a batch that did not reach the log: their callers answer
  /// `unavailable`; socket closes are kept to be logged on the next beat.
  func failBatch(_ entries: [PendingAppend]) {
    stats.appendFailures += UInt64(entries.count)
    for (input, failed) in entries {
      if case .closed = input, number != 0 { unloggedCloses.append(input) }
      failed?()
    }
  }

  func generationLost(_ why: String) {
    guard state == .ready || state == .catchingUp else { return }
    logger.warning("cluster generation changed in Redis", metadata: ["node": "\(config.nodeId)", "why": "\(why)"])
    dropConnections()  // reconnect → bootstrap → reset under the new generation
  }

  // MARK: Scripts

  /// Runs a script by its SHA1 once loaded (`EVALSHA` sends 40 bytes, not the script),
  /// falling back to `EVAL` when Redis forgot it (`NOSCRIPT`: restarted or flushed).
  /// The append script's fallback is the append machine's (`bySHA`, `.noScript`).
  func run(
    _ script: RedisScript, keys: [[UInt8]], args: [[UInt8]], bySHA: Bool? = nil,
    _ reply: @escaping (RESPValue?) -> Void
  ) {
    guard let commands else { return reply(nil) }
    let tail = [Array(String(keys.count).utf8)] + keys + args
    if bySHA != false, let sha = scriptSHAs[script] {
      commands.send([Array("EVALSHA".utf8), sha] + tail) { [weak self] answer in
        if bySHA == nil, case .error(let message)? = answer, message.hasPrefix("NOSCRIPT"), let self {
          self.scriptSHAs[script] = nil
          self.commands?.send([Array("EVAL".utf8), script.source] + tail, reply) ?? reply(nil)
          self.loadScripts()
          return
        }
        reply(answer)
      }
    } else {
      commands.send([Array("EVAL".utf8), script.source] + tail, reply)
    }
  }

  func loadScripts() {
    for script in RedisScript.allCases {
      commands?.send([Array("SCRIPT".utf8), Array("LOAD".utf8), script.source]) { [weak self] reply in
        guard let self, case .bulk(let sha?)? = reply else { return }
        self.scriptSHAs[script] = sha
        if script == .append { self.perform(self.driver.handle(.scriptLoaded)) }
      }
    }
  }
}

/// The Lua scripts of the cluster (Redis 7 function flags through the shebang line:
/// a script that may write is refused whole while Redis is over `maxmemory`, so an
/// append never counts a position it could not write).
enum RedisScript: CaseIterable {
  /// Founds a generation if there is none (or replaces `ARGV[3]`, whose keys are
  /// inconsistent, deleting them), and returns the current one.
  /// KEYS: generation, meta:new, seq:new[, meta:old, seq:old, log:old, snapshot:old].
  /// ARGV: new name, meta line, old name or "".
  case found
  /// Appends one record. KEYS: generation, seq, log. ARGV: generation name, batch.
  case append
  /// Swaps in a snapshot staged in chunks (ClusterNode+SnapshotStore.swift) if newer
  /// than the stored one and staged whole, trims the log behind the previous
  /// snapshot, and appends the storer's digest record; 'old' or 'short' otherwise.
  /// KEYS: generation, seq, log, snapshot, snapshot-bytes, staging.
  /// ARGV: name, batch, position, id, digest, byte count.
  case snapshot
  /// Hands a generation over to its successor (rolling upgrade): if the generation
  /// is still `ARGV[1]`, makes `ARGV[2]` current with its meta line, position counter
  /// and first snapshot, creates its (empty) log, and lets the old keys expire.
  /// KEYS: generation, meta:new, seq:new, snapshot:new, log:new, then the old meta, seq,
  /// log, snapshot. ARGV: old name, new name, meta line, position, digest, bytes.
  case handoff

  var source: [UInt8] {
    switch self {
    case .handoff: return Array(Self.handoffSource.utf8)
    case .found: return Array(Self.foundSource.utf8)
    case .append: return Array((Self.appendPrelude + Self.appendTail).utf8)
    case .snapshot: return Array((Self.appendPrelude + Self.snapshotBody + Self.appendTail).utf8)
    }
  }

  private static let foundSource = """
    #!lua
    local g = redis.call('GET', KEYS[1])
    if (not g) or (ARGV[3] ~= '' and g == ARGV[3]) then
      redis.call('SET', KEYS[1], ARGV[1])
      redis.call('SET', KEYS[2], ARGV[2])
      redis.call('SET', KEYS[3], '0')
      for i = 4, #KEYS do redis.call('DEL', KEYS[i]) end
      return ARGV[1]
    end
    return g
    """

  private static let handoffSource = """
    #!lua
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 'moved' end
    redis.call('SET', KEYS[1], ARGV[2])
    redis.call('SET', KEYS[2], ARGV[3])
    redis.call('SET', KEYS[3], ARGV[4])
    redis.call('HSET', KEYS[4], 'pos', ARGV[4], 'id', '0', 'digest', ARGV[5], 'bytes', ARGV[6])
    redis.call('XADD', KEYS[5], '*', 'created', '1')
    redis.call('XTRIM', KEYS[5], 'MAXLEN', 0)
    for i = 6, #KEYS do redis.call('EXPIRE', KEYS[i], 600) end
    return ARGV[2]
    """

  /// Checks the generation and that its counter and log are still there (an evicted
  /// or deleted key must read as a lost generation, never as a fresh start).
  private static let appendPrelude = """
    #!lua
    if redis.call('GET', KEYS[1]) ~= ARGV[1] then return redis.error_reply('RESET generation changed') end
    local last = redis.call('GET', KEYS[2])
    if not last then return redis.error_reply('RESET log position lost') end
    if tonumber(last) > 0 and redis.call('EXISTS', KEYS[3]) == 0 then
      return redis.error_reply('RESET log lost')
    end

    """

  private static let snapshotBody = """
    local stored = tonumber(redis.call('HGET', KEYS[4], 'pos') or '0')
    if tonumber(ARGV[3]) <= stored then
      redis.call('DEL', KEYS[6])
      return 'old'
    end
    if redis.call('STRLEN', KEYS[6]) ~= tonumber(ARGV[6]) then
      redis.call('DEL', KEYS[6])
      return 'short'
    end
    local previous = redis.call('HGET', KEYS[4], 'id')
    redis.call('RENAME', KEYS[6], KEYS[5])
    redis.call('PERSIST', KEYS[5])
    redis.call('HDEL', KEYS[4], 'bytes')
    redis.call('HSET', KEYS[4], 'pos', ARGV[3], 'id', ARGV[4], 'digest', ARGV[5])
    if previous then redis.call('XTRIM', KEYS[3], 'MINID', previous) end

    """

  /// `t` is Redis's clock: the log's only clock (docs/cluster.md, "Time").
  private static let appendTail = """
    local now = redis.call('TIME')
    local ms = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
    local n = redis.call('INCR', KEYS[2])
    return redis.call('XADD', KEYS[3], '*', 'e', ARGV[2], 'n', n, 't', ms)
    """
}

extension AppendDriver.ScriptReply {
  /// The append script's RESP reply as the machine's input.
  init(_ reply: RESPValue?) {
    switch reply {
    case .bulk?, .simple?: self = .stored
    case .error(let message)? where message.hasPrefix("NOSCRIPT"): self = .noScript
    case .error(let message)? where message.hasPrefix("RESET"): self = .reset(message)
    case .error(let message)?: self = .error(message)
    case nil: self = .lost
    case let other?: self = .error("unexpected reply \(other)")
    }
  }
}

extension WaitAnswer {
  /// `WAIT`'s RESP reply; nil when the connection ended (or an unexpected reply).
  init?(_ reply: RESPValue?) {
    switch reply {
    case .integer(let n)?: self = .count(n)
    case .error(let message)?: self = .error(message)
    default: return nil
    }
  }
}

/// A batch handed to the append machine: its callers and the generation it goes to.
struct SentAppend {
  var entries: [ClusterNode.PendingAppend]
  var generation: String
}
