// The checks that need the whole picture, run once the system is quiet:
// expected versus received deliveries, every member at the session's final
// seq, one hand queue per session, lost participants, call outcomes.

#if canImport(Glibc)
  import Glibc
#endif

/// Figures the end-of-run checks produce for the report.
struct EndOfRun {
  var deliveriesExpected = 0
  var deliveriesReceived = 0
  var sessionsChecked = 0
  var handQueuesCompared = 0
  var unresolvedLost = 0
  var callsResolved = 0
  var callsUnresolved = 0
}

struct EndOfRunChecks {
  let ctx: RunContext
  let bots: [Bot]
  let rooms: [String: [Bot]]

  func evaluate() -> EndOfRun {
    var out = EndOfRun()
    switch ctx.options.wire {
    case .broadcast:
      out.deliveriesExpected = ctx.broadcastExpected
      out.deliveriesReceived = ctx.stats.deliveries
    case .relay:
      for bot in bots where bot.phase != .ready { bot.view.closeInterval() }
      for (session, members) in rooms.sorted(by: { $0.key < $1.key }) {
        checkSession(session, members, &out)
      }
      let calls = ctx.calls.finish(checker: ctx.checker)
      out.callsResolved = calls.resolved
      out.callsUnresolved = calls.unresolved
    }
    ctx.checker.expect(
      out.deliveriesReceived == out.deliveriesExpected, .deliveries,
      "received \(out.deliveriesReceived) message deliveries, expected \(out.deliveriesExpected)")
    if ctx.options.wire == .relay, ctx.resetSessions.isEmpty {
      ctx.checker.expect(
        ctx.stats.messagesAcked <= messagesObserved(), .deliveries,
        "\(ctx.stats.messagesAcked) messages acknowledged but only \(messagesObserved()) seen by anyone")
    }
    return out
  }

  private func messagesObserved() -> Int {
    ctx.messageSeqs.values.reduce(0) { $0 + $1.seqs.members().count }
  }

  private func checkSession(_ session: String, _ members: [Bot], _ out: inout EndOfRun) {
    out.sessionsChecked += 1
    let finalSeq = members.map(\.view.lastSeq).max() ?? 0
    let seqs = ctx.messageSeqs[session]?.seqs.members() ?? []
    var queues: [(String, [String])] = []
    // Bots connected and joined once quiet: §5 says a participant that came
    // back was restored (or timed out first), so no member may still hold it lost.
    let back = Set(members.filter { $0.phase == .ready && $0.view.member }.map(\.uid))
    // A reset session's seqs mean two things in the ledger: its deliveries
    // cannot be counted (the rest of its checks still hold after the reset).
    let countDeliveries = !ctx.resetSessions.contains(session)
    for bot in members {
      let v = bot.view
      if countDeliveries {
        for (start, end) in v.closedIntervals { out.deliveriesExpected += countInRange(seqs, above: start, upTo: end) }
        out.deliveriesReceived += v.messagesReceived
      }
      guard v.member else { continue }
      if countDeliveries { out.deliveriesExpected += countInRange(seqs, above: v.intervalStart, upTo: finalSeq) }
      ctx.checker.expect(
        v.lastSeq == finalSeq, .seqContinuity,
        "\(bot.uid) in \(session) stopped at seq \(v.lastSeq), session reached \(finalSeq)")
      out.unresolvedLost += v.lost.count
      if v.lastSeq == finalSeq {
        queues.append((bot.uid, v.hands.ordered))
        for subject in v.lost.sorted() {
          ctx.checker.expect(
            !back.contains(subject), .lostResolution,
            "\(bot.uid) in \(session) still holds \(subject) lost, though it is back")
        }
      }
    }
    compareQueues(session, queues, &out)
  }

  /// §7: once quiet, every member holds the same queue, in the same order.
  private func compareQueues(_ session: String, _ queues: [(String, [String])], _ out: inout EndOfRun) {
    guard let (firstUid, reference) = queues.first else { return }
    for (uid, queue) in queues.dropFirst() {
      out.handQueuesCompared += 1
      ctx.checker.expect(
        queue == reference, .handQueue,
        "\(session): \(uid) has [\(queue.prefix(8).joined(separator: ","))] but \(firstUid) has "
          + "[\(reference.prefix(8).joined(separator: ","))]")
    }
  }
}

/// Writes to stderr with write(2): Swift 6 rejects the C `stderr` global as
/// not concurrency-safe, and the bots need nothing buffered.
enum FileOutput {
  case standardError

  func write(_ text: String) {
    var copy = text
    copy.withUTF8 { buf in
      var offset = 0
      while offset < buf.count {
        let n = Glibc.write(2, buf.baseAddress! + offset, buf.count - offset)
        if n <= 0 { return }
        offset += n
      }
    }
  }
}
