// The final report: a table on stdout and, with `--json FILE`, every figure
// as one JSON object (Benchmarks/run.sh and the integration test read it).
import RelayProtocol

struct Report {
  let ctx: RunContext
  let engine: Engine
  let botCount: Int

  private var runSeconds: Double {
    Double(max(1, engine.runEndMs - engine.runStartMs)) / 1_000
  }

  var json: JSONValue {
    let s = ctx.stats
    let e = engine.outcome
    let num = { (v: Int) in JSONValue.num(Double(v)) }
    return .fields([
      ("scenario", .string(ctx.scenario.name)),
      ("protocol", .string(ctx.options.wire.rawValue)),
      ("url", .string(Self.text(ctx.options.url))),
      ("urls", .array(ctx.options.urls.map { .string(Self.text($0)) })),
      ("shard", .string("\(ctx.options.shardIndex)/\(ctx.options.shardCount)")),
      ("bots", num(botCount)),
      ("durationMs", num(Int(engine.runEndMs - engine.runStartMs))),
      ("connectFailures", num(s.connectFailures)),
      ("commandsSent", num(s.commandsSent)),
      ("eventsReceived", num(s.eventsReceived)),
      ("messagesSent", num(s.messagesSent)),
      ("messagesAcked", num(s.messagesAcked)),
      ("deliveriesExpected", num(e.deliveriesExpected)),
      ("deliveriesReceived", num(e.deliveriesReceived)),
      ("deliveriesPerSecond", .num((Double(s.deliveries) / runSeconds).rounded())),
      ("peakDeliveriesPerSecond", .num(s.peakDeliveriesPerSecond.rounded())),
      ("handCommands", num(s.handCommands)),
      ("callsStarted", num(s.callsStarted)),
      ("callsResolved", num(e.callsResolved)),
      ("callsUnresolved", num(e.callsUnresolved)),
      ("resumes", num(s.resumes)),
      ("resumedTrue", num(s.resumedTrue)),
      ("freshRejoins", num(s.freshRejoins)),
      ("reconnects", num(s.reconnects)),
      ("unresolvedLost", num(e.unresolvedLost)),
      ("handQueuesCompared", num(e.handQueuesCompared)),
      ("errorsReceived", num(s.errorsReceived)),
      ("behaviourSkips", num(s.behaviourSkips)),
      ("messageLayoutMisses", num(s.messageLayoutMisses)),
      ("reads", num(s.reads)),
      ("framesReceived", num(s.framesReceived)),
      ("deliveryLatencyUs", s.delivery.summary),
      ("handLatencyUs", s.handDelivery.summary),
      ("replyLatencyUs", s.reply.summary),
      ("connectReadyUs", s.connectReady.summary),
      ("readyAfterMs", num(Int(s.readyAfterMs))),
      ("checks", ctx.checker.json),
      ("checkFailures", num(ctx.checker.totalFailures)),
      ("notes", .array(ctx.checker.notes.map { .string($0) })),
      ("relayFlags", .array(ctx.scenario.relayFlags.map { .string($0) })),
    ])
  }

  var table: String {
    let s = ctx.stats
    let e = engine.outcome
    var rows: [(String, String)] = [
      ("scenario", "\(ctx.scenario.name) (\(ctx.options.wire.rawValue), \(botCount) bots)"),
      ("run", "\(format(runSeconds)) s"),
      ("commands sent", "\(s.commandsSent)"),
      ("events received", "\(s.eventsReceived)"),
      ("messages sent / acked", "\(s.messagesSent) / \(s.messagesAcked)"),
      ("deliveries received / expected", "\(e.deliveriesReceived) / \(e.deliveriesExpected)"),
      ("deliveries/s (mean, peak)", "\(Int(Double(s.deliveries) / runSeconds)), \(Int(s.peakDeliveriesPerSecond))"),
      ("delivery latency p50/p99/p99.9", latencyRow(s.delivery)),
      ("hand event latency p50/p99/p99.9", latencyRow(s.handDelivery)),
      ("reply latency p50/p99/p99.9", latencyRow(s.reply)),
      ("connect → ready p50/p99/p99.9", latencyRow(s.connectReady)),
      ("hand commands", "\(s.handCommands)"),
      ("calls placed / callee legs resolved / still ringing", "\(s.callsStarted) / \(e.callsResolved) / \(e.callsUnresolved)"),
      ("resumes (resumed:true) / fresh rejoins", "\(s.resumes) (\(s.resumedTrue)) / \(s.freshRejoins)"),
      ("reconnects after drops", "\(s.reconnects)"),
      ("errors received", "\(s.errorsReceived)"),
    ]
    for c in CheckName.allCases {
      let checked = ctx.checker.checked(c)
      let failed = ctx.checker.failures(c)
      rows.append(("check \(c.rawValue)", failed == 0 ? "ok (\(checked))" : "FAILED \(failed) of \(checked)"))
    }
    let width = rows.map(\.0.count).max() ?? 0
    var out = rows.map { $0.0 + String(repeating: " ", count: width - $0.0.count) + "  " + $0.1 }
    for c in CheckName.allCases {
      for sample in ctx.checker.samples[c] ?? [] { out.append("  ! \(c.rawValue): \(sample)") }
    }
    for note in ctx.checker.notes { out.append("  note: \(note)") }
    out.append(ctx.checker.totalFailures == 0 ? "RESULT: PASS" : "RESULT: FAIL (\(ctx.checker.totalFailures) check failures)")
    return out.joined(separator: "\n")
  }

  private static func text(_ u: WebSocketURL) -> String { "ws://\(u.host):\(u.port)\(u.path)" }

  private func latencyRow(_ h: LatencyHistogram) -> String {
    guard h.count > 0 else { return "-" }
    let ms = { (us: UInt64) in format(Double(us) / 1_000, decimals: 3) }
    return "\(ms(h.percentile(50))) / \(ms(h.percentile(99))) / \(ms(h.percentile(99.9))) ms (n=\(h.count))"
  }
}
