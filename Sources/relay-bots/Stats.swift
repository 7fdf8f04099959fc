// Counters and latency histograms for one run, plus the once-a-second
// progress line. Everything is touched from the single loop thread only.

import Histogram
import RelayProtocol

/// Latencies in microseconds, 1 µs … 60 s at three significant digits.
struct LatencyHistogram {
  private(set) var histogram = Histogram<UInt64>(
    highestTrackableValue: 60_000_000, numberOfSignificantValueDigits: .three)

  mutating func record(ns: UInt64) {
    let us = max(1, min(ns / 1_000, 60_000_000))
    _ = histogram.record(us)
  }

  var count: UInt64 { histogram.totalCount }

  func percentile(_ p: Double) -> UInt64 {
    count == 0 ? 0 : histogram.valueAtPercentile(p)
  }

  var summary: JSONValue {
    .fields([
      ("count", .num(Double(count))),
      ("p50", .num(Double(percentile(50)))),
      ("p90", .num(Double(percentile(90)))),
      ("p99", .num(Double(percentile(99)))),
      ("p999", .num(Double(percentile(99.9)))),
      ("max", .num(Double(count == 0 ? 0 : histogram.max))),
      ("mean", .num(count == 0 ? 0 : (histogram.mean * 10).rounded() / 10)),
    ])
  }
}

/// Run-wide counters. Rates in the progress line are deltas between samples.
///
/// `@exclusivity(unchecked)` on the counters touched per delivery: the
/// runtime's dynamic exclusivity bookkeeping costs more than the increments
/// themselves, and every access here is a plain read-modify-write
/// on the single loop thread that never overlaps another access to it.
final class Stats {
  var connectsStarted = 0
  var connected = 0  // currently upgraded connections
  var openSockets = 0  // TCP connections not yet closed (server may still be closing)
  var ready = 0  // currently welcomed (relay) or upgraded (broadcast)
  var connectFailures = 0
  var commandsSent = 0
  @exclusivity(unchecked) var framesReceived = 0
  @exclusivity(unchecked) var reads = 0  // socket reads that delivered bytes
  @exclusivity(unchecked) var eventsReceived = 0
  var messagesSent = 0
  var messagesAcked = 0
  @exclusivity(unchecked) var deliveries = 0  // message events received by any bot
  var handCommands = 0
  var errorsReceived = 0
  var resumes = 0
  var resumedTrue = 0
  var freshRejoins = 0
  var reconnects = 0  // reconnects after the relay dropped or refused a bot
  var callsStarted = 0
  var behaviourSkips = 0
  var pingsReceived = 0
  /// Message events the fast layout did not match (still checked, slower).
  var messageLayoutMisses = 0
  @exclusivity(unchecked) var delivery = LatencyHistogram()  // command send → each member's receipt
  var reply = LatencyHistogram()  // command send → its ok/error/welcome
  /// A bot's first TCP connect → ready (upgraded, and for the relay welcomed and joined).
  var connectReady = LatencyHistogram()
  /// Start of the run → every bot ready (the ramp).
  var readyAfterMs: UInt64 = 0
  var handDelivery = LatencyHistogram()  // hand command → each member's hand event

  private var lastSampleMs: UInt64 = 0
  private var lastCommands = 0
  private var lastEvents = 0
  private var lastDeliveries = 0
  private(set) var peakDeliveriesPerSecond = 0.0

  /// One progress line; `failures` comes from the checker.
  func progressLine(nowMs: UInt64, elapsedMs: UInt64, total: Int, failures: Int) -> String {
    let dt = Double(max(1, nowMs - lastSampleMs)) / 1000
    let cmdRate = Double(commandsSent - lastCommands) / dt
    let evRate = Double(eventsReceived - lastEvents) / dt
    let delRate = Double(deliveries - lastDeliveries) / dt
    if lastSampleMs != 0 { peakDeliveriesPerSecond = max(peakDeliveriesPerSecond, delRate) }
    lastSampleMs = nowMs
    lastCommands = commandsSent
    lastEvents = eventsReceived
    lastDeliveries = deliveries
    let p99 = Double(delivery.percentile(99)) / 1000
    return "[\(elapsedMs / 1000)s] conns \(ready)/\(total)  cmd/s \(Int(cmdRate))  ev/s \(Int(evRate))"
      + "  deliveries/s \(Int(delRate))  p99 \(format(p99))ms  errors \(errorsReceived)"
      + "  check failures \(failures)"
  }
}

/// Fixed-point formatting without Foundation's locale machinery.
func format(_ v: Double, decimals: Int = 2) -> String {
  guard v.isFinite else { return "-" }
  var scale = 1.0
  for _ in 0..<decimals { scale *= 10 }
  let r = (v * scale).rounded() / scale
  var s = "\(r)"
  if s.hasSuffix(".0") && decimals == 0 { s.removeLast(2) }
  if let dot = s.firstIndex(of: "."), s.distance(from: dot, to: s.endIndex) - 1 < decimals {
    s += String(repeating: "0", count: decimals - s.distance(from: dot, to: s.endIndex) + 1)
  }
  return s
}
