// Correctness checks every bot applies to what it receives (PROTOCOL.md §2,
// §5, §7, §7a, §8, §9). Failures are tallied by check name with a few sample
// details; any failure makes the run exit non-zero.
import RelayClientCore
import RelayProtocol

/// The checks a run reports, in report order.
enum CheckName: String, CaseIterable {
  case seqContinuity = "seq-continuity"  // §2: no gap, no duplicate, across resumes
  case handQueue = "hand-queue"  // §7: one queue on every member once quiet
  case callOutcome = "call-outcome"  // §9: exactly one terminal outcome per callee
  case lostResolution = "lost-resolution"  // §5: lost → exactly one restored/timed_out
  case unexpectedError = "unexpected-error"  // no `error` the scenario did not allow
  case deliveries = "deliveries"  // §7a: received == expected message deliveries
  case resume = "resume"  // §8: resume within grace is honoured
  case connection = "connection"  // upgrade, hello and close handshakes behave

  /// Index into the checker's tallies.
  var slot: Int {
    switch self {
    case .seqContinuity: 0
    case .handQueue: 1
    case .callOutcome: 2
    case .lostResolution: 3
    case .unexpectedError: 4
    case .deliveries: 5
    case .resume: 6
    case .connection: 7
    }
  }
}

/// Pass/fail tallies with a bounded list of sample failure details.
final class Checker {
  // Tallies by `CheckName.slot` in plain arrays: `pass` runs once per
  // delivered event, and hashing the name into a dictionary there was a
  // visible share of the bots' CPU at fan-out rates. Unchecked exclusivity:
  // see `Stats` (single thread, no overlapping access).
  @exclusivity(unchecked) private var passCounts = [Int](repeating: 0, count: CheckName.allCases.count)
  private var failCounts = [Int](repeating: 0, count: CheckName.allCases.count)
  private(set) var samples: [CheckName: [String]] = [:]
  private(set) var notes: [String] = []
  private static let maxSamples = 10

  /// Conditions checked (passed or failed) per check.
  func checked(_ check: CheckName) -> Int { passCounts[check.slot] + failCounts[check.slot] }
  func failures(_ check: CheckName) -> Int { failCounts[check.slot] }
  var totalFailures: Int { failCounts.reduce(0, +) }

  func pass(_ check: CheckName, count: Int = 1) { passCounts[check.slot] &+= count }

  func fail(_ check: CheckName, _ detail: @autoclosure () -> String) {
    failCounts[check.slot] += 1
    if samples[check, default: []].count < Self.maxSamples { samples[check, default: []].append(detail()) }
  }

  /// Records a condition: pass when true, else a failure with the detail.
  func expect(_ ok: Bool, _ check: CheckName, _ detail: @autoclosure () -> String) {
    if ok { pass(check) } else { fail(check, detail()) }
  }

  func note(_ text: String) { if !notes.contains(text) { notes.append(text) } }

  var json: JSONValue {
    .fields(
      CheckName.allCases.map { c in
        (
          c.rawValue,
          .fields([
            ("checked", .num(Double(checked(c)))),
            ("failures", .num(Double(failures(c)))),
            ("samples", .array((samples[c] ?? []).map { .string($0) })),
          ])
        )
      })
  }
}

/// What one bot knows about one session it belongs to: the sequence position,
/// its membership intervals (for expected deliveries), the hand queue rebuilt
/// from snapshots and events, and participants currently lost.
struct SessionView {
  let session: String
  var member = false
  var lastSeq = 0
  /// The open interval's start: events with seq > start are expected.
  var intervalStart = 0
  /// Finished membership intervals as (start exclusive, end inclusive).
  var closedIntervals: [(Int, Int)] = []
  var hands = HandQueue()
  var lastRaisedAt = 0.0
  var lost: Set<String> = []
  var messagesReceived = 0

  init(session: String) { self.session = session }

  /// A `session.joined` snapshot (fresh join or `recovered: false`), as the
  /// client machine decoded it.
  mutating func applySnapshot(_ snapshot: SessionState) {
    closeInterval()
    let seq = Int(snapshot.seq)
    member = true
    lastSeq = seq
    intervalStart = seq
    hands = HandQueue(snapshot.hands.map(\.uid))
    lastRaisedAt = Double(snapshot.hands.last?.raisedAt ?? 0)
    lost = Set(snapshot.participants.filter { $0.status == .lost }.map(\.uid))
  }

  /// Ends membership (left, removed, replaced, gone for good).
  mutating func closeInterval() {
    if member { closedIntervals.append((intervalStart, lastSeq)) }
    member = false
  }

  /// §2: each session event's seq is exactly the previous plus one.
  /// `type` is only spelled out for a failure's detail.
  mutating func advance(seq: Int, type: @autoclosure () -> String, uid: String, checker: Checker) -> Bool {
    guard member else {
      checker.fail(.seqContinuity, "\(uid) got \(type()) seq \(seq) in \(session) while not a member")
      return false
    }
    if seq == lastSeq + 1 {
      lastSeq = seq
      checker.pass(.seqContinuity)
      return true
    }
    let isGap = seq > lastSeq
    let what = isGap ? "gap" : "duplicate/old"
    checker.fail(.seqContinuity, "\(uid) in \(session): \(what) seq \(seq) after \(lastSeq) (\(type()))")
    if isGap { lastSeq = seq }
    return isGap
  }

  /// Applies one in-order session event to the hand queue and lost set.
  mutating func apply(_ kind: EventKind, subject: String, raisedAt: Double, me: String, checker: Checker) {
    switch kind {
    case .handRaised: applyRaised(subject, raisedAt: raisedAt, me: me, checker: checker)
    case .handLowered:
      checker.expect(
        hands.remove(subject), .handQueue, "\(me): hand.lowered for \(subject) whose hand is not up")
    case .handsCleared: hands.removeAll()
    case .participantLost:
      checker.expect(!lost.contains(subject), .lostResolution, "\(me): \(subject) lost twice in a row")
      lost.insert(subject)
    case .participantRestored, .participantTimedOut:
      checker.expect(
        lost.remove(subject) != nil, .lostResolution,
        "\(me): \(kind.rawValue) for \(subject) without participant.lost")
      if kind == .participantTimedOut { checkHandDown(subject, kind, me: me, checker: checker) }
    case .participantLeft:
      lost.remove(subject)
      checkHandDown(subject, kind, me: me, checker: checker)
    case .message, .participantJoined, .other: break
    }
  }

  private mutating func applyRaised(_ uid: String, raisedAt: Double, me: String, checker: Checker) {
    checker.expect(!hands.contains(uid), .handQueue, "\(me): hand.raised for \(uid) already up")
    checker.expect(
      raisedAt >= lastRaisedAt, .handQueue, "\(me): raisedAt went back (\(raisedAt) < \(lastRaisedAt))")
    lastRaisedAt = max(lastRaisedAt, raisedAt)
    _ = hands.remove(uid)
    hands.append(uid)
  }

  /// §6/§7: a leaving participant's raised hand is lowered by an explicit event first.
  private mutating func checkHandDown(_ uid: String, _ kind: EventKind, me: String, checker: Checker) {
    if hands.remove(uid) {
      checker.fail(.handQueue, "\(me): \(kind.rawValue) for \(uid) while its hand was still up")
    }
  }
}

/// The session events the checks follow (§2), by wire name.
enum EventKind: String {
  case message
  case handRaised = "hand.raised"
  case handLowered = "hand.lowered"
  case handsCleared = "hands.cleared"
  case participantJoined = "participant.joined"
  case participantLeft = "participant.left"
  case participantLost = "participant.lost"
  case participantRestored = "participant.restored"
  case participantTimedOut = "participant.timed_out"
  case other
}

/// The raised-hand queue in `hand.raised` order with O(1) membership: a
/// 1 000-member session sees every hand event on every member, so linear
/// scans per event would make the bots, not the relay, the bottleneck.
struct HandQueue: Equatable {
  private var slots: [String?] = []
  private var position: [String: Int] = [:]
  private var holes = 0

  init(_ uids: [String] = []) { for u in uids where position[u] == nil { append(u) } }

  var count: Int { position.count }
  var ordered: [String] { slots.compactMap { $0 } }
  var first: String? { slots.first { $0 != nil } ?? nil }
  func contains(_ uid: String) -> Bool { position[uid] != nil }

  mutating func append(_ uid: String) {
    position[uid] = slots.count
    slots.append(uid)
  }

  /// Removes `uid`; false when it was not in the queue.
  mutating func remove(_ uid: String) -> Bool {
    guard let i = position.removeValue(forKey: uid) else { return false }
    slots[i] = nil
    holes += 1
    if holes > 32 && holes * 2 > slots.count { compact() }
    return true
  }

  mutating func removeAll() {
    slots.removeAll()
    position.removeAll()
    holes = 0
  }

  private mutating func compact() {
    let live = ordered
    removeAll()
    for u in live { append(u) }
  }

  static func == (a: HandQueue, b: HandQueue) -> Bool { a.ordered == b.ordered }
}

/// Per call, per callee: the terminal outcome seen by the caller and by the
/// callee (§9: exactly one each).
final class CallLedger {
  struct Call {
    var caller: String
    var callees: [String]
    var callerSide: [String: String] = [:]
    var calleeSide: [String: String] = [:]
    var incoming: Set<String> = []
  }
  private(set) var calls: [String: Call] = [:]

  func started(callId: String, caller: String, callees: [String]) {
    if calls[callId] == nil { calls[callId] = Call(caller: caller, callees: callees) }
  }

  func incoming(callId: String, callee: String) { calls[callId]?.incoming.insert(callee) }

  func callerOutcome(callId: String, callee: String, _ outcome: String, checker: Checker) {
    guard calls[callId] != nil else { return }
    if let prior = calls[callId]?.callerSide[callee] {
      checker.fail(.callOutcome, "call \(callId): caller saw \(outcome) for \(callee) after \(prior)")
      return
    }
    calls[callId]?.callerSide[callee] = outcome
  }

  func calleeOutcome(callId: String, callee: String, _ outcome: String, checker: Checker) {
    guard calls[callId] != nil else { return }
    if let prior = calls[callId]?.calleeSide[callee] {
      checker.fail(.callOutcome, "call \(callId): \(callee) saw \(outcome) after \(prior)")
      return
    }
    calls[callId]?.calleeSide[callee] = outcome
  }

  /// The caller cancelled: every callee without an outcome yet is cancelled.
  func cancelledByCaller(callId: String) {
    guard let call = calls[callId] else { return }
    for c in call.callees where call.callerSide[c] == nil { calls[callId]?.callerSide[c] = "cancelled" }
  }

  /// End of run: counts unresolved pairs (still ringing: not a failure) and
  /// pairs that ended without any caller-side outcome after the callee's.
  func finish(checker: Checker) -> (resolved: Int, unresolved: Int) {
    var resolved = 0
    var unresolved = 0
    for (id, call) in calls.sorted(by: { $0.key < $1.key }) {
      for callee in call.callees {
        let caller = call.callerSide[callee]
        let own = call.calleeSide[callee]
        if caller == nil && own == nil { unresolved += 1; continue }
        resolved += 1
        let consistent = caller == nil || own == nil || caller == own || (caller == "cancelled" && own != "accepted")
        checker.expect(consistent, .callOutcome, "call \(id) \(callee): caller saw \(caller ?? "-"), callee \(own ?? "-")")
      }
    }
    return (resolved, unresolved)
  }
}

/// Count of elements of a sorted array in the range (low, high].
func countInRange(_ sorted: [Int], above low: Int, upTo high: Int) -> Int {
  guard high > low else { return 0 }
  return upperBound(sorted, high) - upperBound(sorted, low)
}

private func upperBound(_ a: [Int], _ v: Int) -> Int {
  var lo = 0
  var hi = a.count
  while lo < hi {
    let mid = (lo + hi) / 2
    if a[mid] <= v { lo = mid + 1 } else { hi = mid }
  }
  return lo
}
