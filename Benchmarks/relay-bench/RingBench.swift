import EventLoop
import RelayCore
import RelayProtocol

#if canImport(Glibc)
  import Glibc
#endif

/// A ringing storm on the pure core (§9): 2 000 online users (every fifth with a
/// second device) place calls to one or two others with a mix of outcomes — accepted
/// then ended, rejected, cancelled, left to ring out, busy and offline callees. Virtual
/// time advances 5 ms per call, so every user stays under 10 `call.initiate` per
/// 60 000 ms, unanswered calls time out 45 000 ms later and finished calls are purged.
enum RingBench {
  static let users = 2_000

  static func run() {
    print("== ring: ringing storm over \(users) users (median of 5)")
    var last = Summary()
    var cpuRates: [Double] = []
    let rate = median {
      last = storm(calls: 40_000)
      cpuRates.append(last.callsPerCPUSecond)
      return last.callsPerSecond
    }
    let cpuRate = cpuRates.sorted()[cpuRates.count / 2]
    print("  \(fmt(rate, 0)) calls/s initiated and answered, wall clock; \(fmt(cpuRate, 0)) per CPU second (the machine is shared)")
    print("  \(fmt(last.commandsPerCall, 2)) call commands and \(fmt(last.messagesPerCall, 1)) messages per call")
    print("  outcomes per callee: " + last.outcomes.sorted { $0.key < $1.key }.map { "\($0.key) \($0.value)" }.joined(separator: ", "))
  }

  struct Summary {
    var callsPerSecond = 0.0
    var callsPerCPUSecond = 0.0
    var commandsPerCall = 0.0
    var messagesPerCall = 0.0
    var outcomes: [String: UInt64] = [:]
  }

  final class Ids: IdentifierSource {
    var n = 0
    func token(byteCount: Int) -> String {
      n += 1
      return "id\(n)"
    }
  }

  /// A small deterministic generator (xorshift64*), so every run is the same storm.
  struct Rng {
    var state: UInt64 = 0x9E37_79B9_7F4A_7C15
    mutating func next(_ bound: Int) -> Int {
      state ^= state >> 12
      state ^= state << 25
      state ^= state >> 27
      return Int((state &* 0x2545_F491_4F6C_DD1D) >> 33) % bound
    }
  }

  final class Storm {
    let core: RelayCore
    let ids = Ids()
    var t: Int64 = 1_000
    var commands = 0
    var messages = 0
    /// Accepted calls still in progress (callId, a connection of a party), ended later.
    var inProgress: [(String, ConnectionID)] = []

    init() {
      core = RelayCore(config: CoreConfig(devMode: true, serverVersion: "bench"), ids: ids, verifyToken: { _, _ in nil })
      var c: UInt64 = 1
      for i in 0..<RingBench.users {
        for _ in 0..<(i % 5 == 0 ? 2 : 1) {
          send(ConnectionID(c), open: true, #"{"type":"hello","dev":{"uid":"u\#(i)","name":"U\#(i)"}}"#)
          c += 1
        }
      }
      commands = 0
      messages = 0
    }

    var at: Instant { Instant(monoMs: t, wallMs: 1_700_000_000_000 + t) }

    func send(_ c: ConnectionID, open: Bool = false, _ text: String) {
      if open { core.open(c, at: at) }
      core.receive(c, text: Array(text.utf8), at: at)
      commands += 1
      drain()
    }

    func drain() {
      for effect in core.takeEffects() {
        if case .send(_, let to) = effect { messages += to.count }
      }
    }
  }

  /// First connection of user `i` (users whose index is a multiple of 5 have two).
  static func connection(_ i: Int) -> ConnectionID {
    ConnectionID(UInt64(i + (i + 4) / 5 + 1))
  }

  static func storm(calls: Int) -> Summary {
    let s = Storm()
    var rng = Rng()
    let start = Loop.hrtimeNs()
    let cpuStart = threadCPUSeconds()
    for k in 0..<calls {
      s.t += 5
      s.core.tick(at: s.at)
      s.drain()
      let caller = k % users
      var to = ["u\((caller + 1 + rng.next(users - 1)) % users)"]
      if rng.next(4) == 0 { to.append("u\((caller + 1 + rng.next(users - 1)) % users)") }
      if rng.next(10) == 0 { to.append("offline\(k)") }
      let callId = "id\(s.ids.n + 1)"
      let list = to.map { "\"\($0)\"" }.joined(separator: ",")
      s.send(connection(caller), #"{"type":"call.initiate","id":"i","to":[\#(list)],"callType":"audio"}"#)
      answer(s, callId, callee: Int(to[0].dropFirst())!, caller: caller, roll: rng.next(100))
      if s.inProgress.count > 50 {
        let (id, c) = s.inProgress.removeFirst()
        s.send(c, #"{"type":"call.end","id":"e","callId":"\#(id)"}"#)
      }
    }
    let elapsed = seconds(since: start)
    let cpu = threadCPUSeconds() - cpuStart
    let stats = s.core.callStats
    return Summary(
      callsPerSecond: Double(calls) / elapsed, callsPerCPUSecond: Double(calls) / cpu, commandsPerCall: Double(s.commands) / Double(calls),
      messagesPerCall: Double(s.messages) / Double(calls), outcomes: stats.outcomes)
  }

  /// CPU time of this thread: steadier than wall time on a shared machine.
  static func threadCPUSeconds() -> Double {
    var ts = timespec()
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts)
    return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
  }

  /// The first callee answers: 45 % accept (ended 50 calls later), 20 % reject, the
  /// caller cancels 15 %, and 20 % ring until the timeout.
  static func answer(_ s: Storm, _ callId: String, callee: Int, caller: Int, roll: Int) {
    let c = connection(callee)
    switch roll {
    case ..<45:
      s.send(c, #"{"type":"call.accept","id":"a","callId":"\#(callId)"}"#)
      s.inProgress.append((callId, connection(caller)))
    case ..<65:
      s.send(c, #"{"type":"call.reject","id":"r","callId":"\#(callId)"}"#)
    case ..<80:
      s.send(connection(caller), #"{"type":"call.cancel","id":"x","callId":"\#(callId)"}"#)
    default:
      break
    }
  }
}
