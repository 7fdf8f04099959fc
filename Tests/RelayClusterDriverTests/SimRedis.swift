import RelayClusterDriver
import RelayPrimitives

/// A simulated Redis for the append machine: one primary's log (a list of records),
/// replicas that copy a prefix of it at their own pace (or stall), and one
/// pipelined connection whose replies come back in order after a delay. Requests
/// run when they arrive, as Redis runs them; a `WAIT` answers once enough replicas
/// hold everything before it, or at its deadline with how many do.
struct SimRedis {
  enum Request {
    case append(AppendDriver.Token, [UInt8], bySHA: Bool)
    case wait(AppendDriver.Token, Int)
    case load
  }

  enum Reply {
    case script(AppendDriver.Token, AppendDriver.ScriptReply)
    case wait(AppendDriver.Token, WaitAnswer?)
    case loaded
  }

  private struct InFlight {
    var request: Request
    var result: Reply?
    var readyMs: UInt64
    /// For a `WAIT`: how much of the log it waits for, and its deadline.
    var upTo = 0
    var deadlineMs: UInt64 = 0
  }

  var log: [[UInt8]] = []
  /// How much of the log each replica holds; stalled ones copy nothing.
  var replicas: [(held: Int, stalled: Bool)] = [(0, false)]
  var scriptCached = true
  /// Whether the appends fail (out of memory) for now.
  var refusing = false
  private var queue: [InFlight] = []
  private(set) var connected = true

  func held(upTo n: Int) -> Int { replicas.filter { $0.held >= n }.count }

  var pending: Int { queue.count }

  /// A request arrives and runs (a `WAIT` runs when its turn comes).
  mutating func send(_ request: Request, nowMs: UInt64, latencyMs: UInt64) {
    guard connected else { return }
    let ready = max(queue.last?.readyMs ?? 0, nowMs + latencyMs)
    var entry = InFlight(request: request, result: nil, readyMs: ready)
    switch request {
    case .append(let t, let record, let bySHA):
      if bySHA && !scriptCached {
        entry.result = .script(t, .noScript)
      } else if refusing {
        entry.result = .script(t, .error("OOM command not allowed"))
      } else {
        log.append(record)
        entry.result = .script(t, .stored)
      }
    case .wait:
      entry.upTo = log.count
      entry.deadlineMs = nowMs + AppendDriver.replicationWaitMs
    case .load:
      scriptCached = true
      entry.result = .loaded
    }
    queue.append(entry)
  }

  /// The replies due by now, in order (a blocked `WAIT` holds back the ones behind it).
  mutating func replies(nowMs: UInt64) -> [Reply] {
    var out: [Reply] = []
    while let head = queue.first, head.readyMs <= nowMs {
      if case .wait(let t, let n) = head.request {
        let count = held(upTo: head.upTo)
        guard count >= n || nowMs >= head.deadlineMs else { break }
        out.append(.wait(t, .count(Int64(count))))
      } else if let result = head.result {
        out.append(result)
      }
      queue.removeFirst()
    }
    return out
  }

  /// Replicas copy some more of the log.
  mutating func replicate(using random: inout SeededRandom) {
    for i in replicas.indices where !replicas[i].stalled {
      replicas[i].held = min(log.count, replicas[i].held + random.below(4))
    }
  }

  /// The connection ends: every request still owed a reply gets none (appends that
  /// ran stay in the log).
  mutating func disconnect() -> [Reply] {
    connected = false
    let lost = queue.map { entry -> Reply in
      switch entry.request {
      case .append(let t, _, _): return .script(t, .lost)
      case .wait(let t, _): return .wait(t, nil)
      case .load: return .loaded
      }
    }
    queue = []
    return lost.filter { if case .loaded = $0 { return false } else { return true } }
  }

  mutating func reconnect() { connected = true }

  /// The primary dies and its most advanced replica is promoted without the records
  /// it lacked (a lost tail); the old primary comes back later as an empty replica.
  mutating func failover() -> [Reply] {
    let lost = disconnect()
    guard let best = replicas.indices.max(by: { replicas[$0].held < replicas[$1].held }) else { return lost }
    log = Array(log.prefix(replicas[best].held))
    replicas.remove(at: best)
    for i in replicas.indices { replicas[i].held = min(replicas[i].held, log.count) }
    scriptCached = false
    return lost
  }
}
