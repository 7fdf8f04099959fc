// protocol/ §5.6 `participants.diff`: the membership events of one session
// (`participant.joined/left/lost/restored/timed_out`) that a connection which offered
// `presence.diff` (§4 `hello.capabilities`) would get in one turn, delivered as one
// message instead of one message each. A join into an N-member room still costs N
// deliveries, but a storm of k joins in one turn costs each member one message, not k.
//
// It is a grouping at delivery time only: each event keeps its own `seq` in the
// session's log and replay (§2.3, §9), so clients without the capability and every
// resume see exactly the per-event stream they always did. A diff holds a run of
// consecutive events `seqFrom...seq` as its recipient would have received them;
// anything else sent to a recipient with a run pending first sends the run
// (`flushPresenceDiffs`), so no message ever overtakes an earlier event.
import RelayPrimitives
import RelayProtocol

/// The runs of one session waiting for the end of the turn.
final class PendingDiff {
  let session: String
  /// The session's membership events of this turn, consecutive seqs, oldest first.
  var events: [(seq: Int64, wallMs: Int64, payload: Payload)] = []
  /// Recipients in the order they were first given an event (deterministic effects).
  var recipients: [ConnectionID] = []
  /// Each recipient's run: the first and last seq it was given.
  var runs: [ConnectionID: (first: Int64, last: Int64)] = [:]

  init(session: String) { self.session = session }
}

struct RunKey: Hashable {
  let first: Int64
  let last: Int64
}

/// Every pending run, per session in the order they began.
struct PresenceDiffs {
  var sessions: [PendingDiff] = []
  var bySession: [String: PendingDiff] = [:]
  /// Connections with a run pending in any session.
  var waiting: Set<ConnectionID> = []

  var isEmpty: Bool { sessions.isEmpty }
}

extension RelayCore {
  static func isMembershipEvent(_ type: String) -> Bool {
    switch type {
    case "participant.joined", "participant.left", "participant.lost", "participant.restored", "participant.timed_out":
      return true
    default:
      return false
    }
  }

  /// Delivers membership event `seq` of `session`: at once to recipients without the
  /// capability, into a pending run for the others.
  func deliverMembership(
    _ session: Session, seq: Int64, wallMs: Int64, _ payload: Payload, to recipients: [ConnectionID], type: String
  ) {
    if let pending = presenceDiffs.bySession[session.id], pending.events.last?.seq != seq - 1 {
      flushPresenceDiffs()  // an event of this session went out meanwhile: runs are consecutive
    }
    var plain: [ConnectionID] = []
    var pending: PendingDiff?
    for c in recipients {
      guard let connection = connections[c], connection.acceptsPresenceDiff else {
        plain.append(c)
        continue
      }
      let run = pending ?? startRun(session)
      pending = run
      if let existing = run.runs[c] {
        if existing.last != seq - 1 {
          // Not given an event in between (it was excluded from it): its run so far
          // goes now, and a new one starts here.
          effects.append(.send(diffPayload(run, first: existing.first, last: existing.last), to: [c]))
          run.runs[c] = (seq, seq)
        } else {
          run.runs[c] = (existing.first, seq)
        }
      } else {
        run.runs[c] = (seq, seq)
        run.recipients.append(c)
        presenceDiffs.waiting.insert(c)
      }
    }
    pending?.events.append((seq, wallMs, payload))
    counters.eventsByType[type, default: 0] += 1
    if !plain.isEmpty { effects.append(.send(payload, to: plain)) }
  }

  private func startRun(_ session: Session) -> PendingDiff {
    if let existing = presenceDiffs.bySession[session.id] { return existing }
    let fresh = PendingDiff(session: session.id)
    presenceDiffs.bySession[session.id] = fresh
    presenceDiffs.sessions.append(fresh)
    return fresh
  }

  /// Membership events wait for `flushPresenceDiffs`.
  public var hasPendingPresenceDiffs: Bool { !presenceDiffs.isEmpty }

  /// Whether a message to `recipients` must wait for pending runs to go first.
  func overtakesPresenceDiff(_ recipients: [ConnectionID]) -> Bool {
    guard !presenceDiffs.isEmpty else { return false }
    return recipients.contains { presenceDiffs.waiting.contains($0) }
  }

  /// Sends every pending run: one `participants.diff` per recipient group with the
  /// same run (a lone event goes as itself). The shell calls this once per loop turn,
  /// after the turn's inputs and before its writes.
  public func flushPresenceDiffs() {
    guard !presenceDiffs.isEmpty else { return }
    let sessions = presenceDiffs.sessions
    presenceDiffs = PresenceDiffs()
    for pending in sessions {
      var groups: [(first: Int64, last: Int64, to: [ConnectionID])] = []
      var groupOfRun: [RunKey: Int] = [:]
      for c in pending.recipients {
        guard let run = pending.runs[c] else { continue }
        let key = RunKey(first: run.first, last: run.last)
        if let index = groupOfRun[key] {
          groups[index].to.append(c)
        } else {
          groupOfRun[key] = groups.count
          groups.append((run.first, run.last, [c]))
        }
      }
      for group in groups {
        effects.append(.send(diffPayload(pending, first: group.first, last: group.last), to: group.to))
      }
    }
  }

  /// `{type: "participants.diff", session, seqFrom, seq, ts, events: [event…]}`, each
  /// event exactly as it would have been sent alone; one event is sent as itself.
  func diffPayload(_ pending: PendingDiff, first: Int64, last: Int64) -> Payload {
    let base = pending.events[0].seq
    let slice = pending.events[Int(first - base)...Int(last - base)]
    if slice.count == 1 { return slice[slice.startIndex].payload }
    counters.eventsByType["participants.diff", default: 0] += 1
    var w = JSONWriter()
    w.beginObject()
    w.field("type", "participants.diff")
    w.field("session", pending.session)
    w.field("seqFrom", first)
    w.field("seq", last)
    w.field("ts", slice[slice.endIndex - 1].wallMs)
    w.key("events")
    w.beginArray()
    for event in slice { w.raw(event.payload.bytes) }
    w.endArray()
    w.endObject()
    return Payload(w.bytes)
  }
}
