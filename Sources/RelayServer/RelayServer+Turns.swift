// No loop turn carries an input storm alone (protocol/ §16, `relay_loop_turn_seconds`).
// The budget counts the loop thread's CPU time (Loop.currentTurnCpuNs), not wall time:
// on shared cores a wall-clock budget ran out after a few reads whenever the relay
// waited for a core, and every such turn's flush wrote to every member again.
// libuv delivers, in one poll phase, a read for every ready socket (batches of 1 024,
// repeated while full): a thousand members re-joining at once would all be answered
// in one turn, timers and /metrics waiting behind them. Once a turn has been busy for
// `turnReadBudgetMs`, a read is not handled but kept (one read, at most 64 KiB, per
// connection) and its connection stops reading: the next bytes wait in the kernel
// (TCP flow control). A 1 ms timer hands the kept reads back (DeferredReads: HTTP
// requests, then clients already there, then new connections), each
// timer turn again only until the budget, so timers, the flush and new I/O get turns
// in between. Past `maxDeferredReadBytes` kept, reads are handled at once again.
// The same keeping is the cluster's backpressure: while the input log is backed up
// (InputLog.isBackedUp) every read is kept, and the kept ones wait for it to drain.
import EventLoop
import RelayCore

/// One lane of kept reads, handed back oldest and newest in turn: the oldest so
/// none waits for ever, the newest so a client that sent one message after a flood
/// of others (a canary after a thousand re-joins) waits behind two reads, not the flood.
struct ReadLane<Entry> {
  /// Popped from the front: nil, so a handed-back read's bytes are freed at once.
  private var queue: [Entry?] = []
  private var head = 0
  private var newestNext = false

  var isEmpty: Bool { head == queue.count }

  mutating func append(_ entry: Entry) { queue.append(entry) }

  mutating func pop() -> Entry {
    let entry: Entry
    if newestNext {
      entry = queue.removeLast()!
    } else {
      entry = queue[head]!
      queue[head] = nil
      head += 1
    }
    newestNext.toggle()
    if isEmpty {
      queue.removeAll(keepingCapacity: queue.count < 4_096)
      head = 0
    }
    return entry
  }
}

/// Kept reads in lanes: plain HTTP requests first (/metrics, /readyz, the admin API:
/// one cheap answer each, and a probe that times out gets a healthy relay
/// restarted), then clients already speaking WebSocket, then new connections asking
/// for the upgrade: a storm of new connections (each upgrade carrying its hello and
/// join) waits behind the clients already there, not the other way round.
///
/// Clients already there are split by what their last read cost: light (a message
/// to a small session) and heavy (a join into a big room, a fan-out to it). The two
/// share the loop's time equally, whatever their numbers: a thousand members
/// re-joining a big room at once cannot make a client of another session wait
/// behind their work, only beside it (fair queueing by cost, as deficit round robin
/// does with packet sizes).
struct ReadLanes<Entry> {
  enum Lane { case http, light, heavy, arriving }
  private var http = ReadLane<Entry>()
  private var light = ReadLane<Entry>()
  private var heavy = ReadLane<Entry>()
  private var arriving = ReadLane<Entry>()
  /// Time spent on each established lane. An empty lane keeps no credit: its count
  /// follows the other's, so a lane that was alone does not make the other wait
  /// for what it spent meanwhile.
  private var lightSpentNs: UInt64 = 0
  private var heavySpentNs: UInt64 = 0

  var isEmpty: Bool { http.isEmpty && light.isEmpty && heavy.isEmpty && arriving.isEmpty }

  mutating func append(_ entry: Entry, to lane: Lane) {
    switch lane {
    case .http: http.append(entry)
    case .light: light.append(entry)
    case .heavy: heavy.append(entry)
    case .arriving: arriving.append(entry)
    }
  }

  /// The next read to hand back and its lane; the lanes must not all be empty.
  /// Report what handling it cost with `charge`.
  mutating func pop() -> (entry: Entry, lane: Lane) {
    if !http.isEmpty { return (http.pop(), .http) }
    if light.isEmpty { lightSpentNs = heavySpentNs }
    if heavy.isEmpty { heavySpentNs = lightSpentNs }
    if light.isEmpty, heavy.isEmpty { return (arriving.pop(), .arriving) }
    if heavy.isEmpty || (!light.isEmpty && lightSpentNs <= heavySpentNs) { return (light.pop(), .light) }
    return (heavy.pop(), .heavy)
  }

  /// What handing back a read of `lane` cost.
  mutating func charge(_ lane: Lane, _ ns: UInt64) {
    switch lane {
    case .light: lightSpentNs &+= ns
    case .heavy: heavySpentNs &+= ns
    case .http, .arriving: break
    }
  }
}

/// A read kept for a later turn: whose, its bytes, and when it was read.
typealias KeptRead = (conn: ServerConnection, bytes: [UInt8], atMs: UInt64)

/// Reads kept for a later turn (ReadLanes), their bytes, and the timer that hands
/// them back.
final class DeferredReads {
  var lanes = ReadLanes<KeptRead>()
  var bytes = 0
  var deferred: UInt64 = 0
  var timer: EventLoop.Timer?
  /// While a kept read is handled: how long it waited (the rate windows count its
  /// messages as having arrived then, RateWindow.tryAcquire(lateMs:)).
  var waitedMs: Int64 = 0

  var isEmpty: Bool { lanes.isEmpty }
}

extension RelayServer {
  /// A read that cost the loop more than this (wall time) makes its connection's
  /// next kept read wait in the heavy lane (ReadLanes): well above a message to a
  /// small session, below a join into a room of hundreds.
  static let heavyReadNs: UInt64 = 250_000

  /// A member of a session this big is heavy whatever its last read cost: its next
  /// message, leave or join reaches them all.
  static let heavyAudience = 100

  /// Whether `conn`'s kept read goes to the heavy lane: its last read was heavy, or
  /// it is a member of a big room (its last read may have been a cheap one, or a
  /// join while the room was still small).
  func readsHeavy(_ conn: ServerConnection) -> Bool {
    conn.readsHeavy || core.audience(of: inputs.connectionID(local: conn.id.raw)) > Self.heavyAudience
  }

  /// Whether a read arriving now waits for a later turn (`readDeferred` then keeps it).
  func shouldDeferRead() -> Bool {
    guard deferredReads.bytes < config.maxDeferredReadBytes else { return false }
    if !deferredReads.isEmpty { return true }  // keep arrival order behind kept reads
    if inputs.isBackedUp { return true }  // backpressure: the socket waits for the log
    return Int64(loop.currentTurnCpuNs / 1_000_000) >= config.turnReadBudgetMs
  }

  /// Keeps a copy of `bytes` and stops `conn` reading until they are handled.
  func readDeferred(_ conn: ServerConnection, _ bytes: UnsafeMutableRawBufferPointer) {
    conn.transport.stopReading()
    conn.hasKeptRead = true
    let entry = (conn, Array(bytes), loop.nowMs)
    let lane: ReadLanes<KeptRead>.Lane =
      conn.isWebSocket ? (readsHeavy(conn) ? .heavy : .light) : Self.startsUpgrade(bytes) ? .arriving : .http
    deferredReads.lanes.append(entry, to: lane)
    deferredReads.bytes += bytes.count
    deferredReads.deferred &+= 1
    armDeferredReads()
  }

  /// The input log drained below its backpressure mark: the kept reads go on.
  package func inputsDrained() {
    if !deferredReads.isEmpty { armDeferredReads() }
  }

  /// A request for the WebSocket endpoint (protocol/ §1 `GET /v1/ws`): a newcomer.
  static func startsUpgrade(_ bytes: UnsafeMutableRawBufferPointer) -> Bool {
    let prefix = "GET /v1/ws".utf8
    guard bytes.count >= prefix.count else { return false }
    return zip(bytes, prefix).allSatisfy { $0 == $1 }
  }

  private func armDeferredReads() {
    if deferredReads.timer == nil { deferredReads.timer = EventLoop.Timer(loop: loop) }
    // 1 ms, not 0: libuv 1.44 reruns a timer restarted with 0 in the same timers pass.
    deferredReads.timer?.start(afterMs: 1) { [unowned self] in self.handleDeferredReads() }
  }

  /// Hands kept reads back, oldest first, until this turn's budget is spent.
  func handleDeferredReads() {
    let budgetNs = UInt64(max(1, config.turnReadBudgetMs)) * 1_000_000
    while !deferredReads.isEmpty, !inputs.isBackedUp {
      let ((conn, bytes, atMs), lane) = deferredReads.lanes.pop()
      deferredReads.bytes -= bytes.count
      conn.hasKeptRead = false
      if !conn.transport.isClosed {
        var copy = bytes
        deferredReads.waitedMs = Int64(loop.nowMs &- atMs)
        let started = Loop.hrtimeNs()
        copy.withUnsafeMutableBytes { conn.handleMeasuredRead($0) }
        deferredReads.lanes.charge(lane, Loop.hrtimeNs() &- started)
        deferredReads.waitedMs = 0
        if !conn.transport.isClosed { conn.transport.startReading() }
      }
      if loop.currentTurnCpuNs >= budgetNs { break }
    }
    // Backed up: `inputsDrained` hands them back.
    if !deferredReads.isEmpty, !inputs.isBackedUp { armDeferredReads() }
  }

  func closeDeferredReads() {
    deferredReads.timer?.close()
    deferredReads.timer = nil
  }

  /// `/metrics`: the longest turn so far, reads kept for a later turn and their bytes.
  func refreshTurnMetrics() {
    metrics.mirror("relay_loop_turn_max_microseconds", Int(clamping: loop.longestTurnNs / 1_000))
    metrics.mirror("relay_loop_turn_cpu_max_microseconds", Int(clamping: loop.longestTurnCpuNs / 1_000))
    metrics.mirrorCounter("relay_loop_deferred_reads_total", deferredReads.deferred)
    metrics.mirror("relay_loop_deferred_read_bytes", deferredReads.bytes)
    metrics.mirrorCounter("relay_loop_deferred_flushes_total", loop.stats.flushesDeferred)
  }
}
