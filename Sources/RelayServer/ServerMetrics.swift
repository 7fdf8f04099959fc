import CoreMetrics
import Metrics
import Prometheus
import RelayCore

/// Transport-level metrics, recorded through swift-metrics into a private
/// Prometheus registry (one per server, so tests can run several servers in one
/// process). Core counters are mirrored into the registry at scrape time.
final class ServerMetrics {
  let registry = PrometheusCollectorRegistry()
  private let factory: PrometheusMetricsFactory

  let connectionsOpen: CoreMetrics.Gauge
  let websocketsOpen: CoreMetrics.Gauge
  let connectionsAccepted: CoreMetrics.Counter
  let bytesIn: CoreMetrics.Counter
  let bytesOut: CoreMetrics.Counter
  let slowConsumerCloses: CoreMetrics.Counter
  let httpRequests: CoreMetrics.Counter
  let commandLatency: Metrics.Timer
  /// Busy time of every event-loop turn (LoopTurns.swift): the bound the relay keeps
  /// (protocol/ §16, 50 ms) is checked against this, not against wall-clock guesses.
  let loopTurn: DurationHistogram
  /// The loop thread's CPU time per turn: a turn longer in `loopTurn` than here
  /// waited for a core.
  let loopTurnCpu: DurationHistogram
  /// Contract §11 webhook deliveries: delivered, given up (or refused), retried, and
  /// dropped because the queue was full.
  let webhookSent: CoreMetrics.Counter
  let webhookFailed: CoreMetrics.Counter
  let webhookRetried: CoreMetrics.Counter
  let webhookDropped: CoreMetrics.Counter
  /// §9a `relay_push_seconds`: from the ring to the push provider's answer.
  let pushSeconds: DurationHistogram
  private var mirrored: [String: CoreMetrics.Gauge] = [:]
  private var mirroredCounters: [String: CoreMetrics.Counter] = [:]

  init() {
    var f = PrometheusMetricsFactory(registry: registry)
    f.defaultDurationHistogramBuckets = [
      .microseconds(5), .microseconds(10), .microseconds(25), .microseconds(50),
      .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1),
      .milliseconds(5), .milliseconds(25), .milliseconds(100),
    ]
    factory = f
    connectionsOpen = CoreMetrics.Gauge(label: "relay_connections_open", factory: f)
    websocketsOpen = CoreMetrics.Gauge(label: "relay_websockets_open", factory: f)
    connectionsAccepted = CoreMetrics.Counter(label: "relay_connections_accepted_total", factory: f)
    bytesIn = CoreMetrics.Counter(label: "relay_bytes_in_total", factory: f)
    bytesOut = CoreMetrics.Counter(label: "relay_bytes_out_total", factory: f)
    slowConsumerCloses = CoreMetrics.Counter(label: "relay_slow_consumer_closes_total", factory: f)
    httpRequests = CoreMetrics.Counter(label: "relay_http_requests_total", factory: f)
    commandLatency = Metrics.Timer(label: "relay_command_duration_seconds", factory: f)
    let turnBuckets: [Duration] = [
      .milliseconds(1), .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50),
      .milliseconds(100), .milliseconds(250), .milliseconds(1000), .milliseconds(5000),
    ]
    loopTurn = registry.makeDurationHistogram(name: "relay_loop_turn_seconds", buckets: turnBuckets)
    loopTurnCpu = registry.makeDurationHistogram(name: "relay_loop_turn_cpu_seconds", buckets: turnBuckets)
    webhookSent = CoreMetrics.Counter(label: "relay_webhook_sent_total", factory: f)
    webhookFailed = CoreMetrics.Counter(label: "relay_webhook_failed_total", factory: f)
    webhookRetried = CoreMetrics.Counter(label: "relay_webhook_retried_total", factory: f)
    webhookDropped = CoreMetrics.Counter(label: "relay_webhook_dropped_total", factory: f)
    pushSeconds = registry.makeDurationHistogram(
      name: "relay_push_seconds",
      buckets: [
        .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
        .milliseconds(250), .milliseconds(500), .milliseconds(1000), .milliseconds(5000), .milliseconds(30000),
      ])
  }

  /// Sets a gauge mirrored from a core value (`name` with optional labels).
  func mirror(_ name: String, labels: [(String, String)] = [], _ value: Int) {
    let key = Self.key(name, labels)
    cached(&mirrored, key) { CoreMetrics.Gauge(label: name, dimensions: labels, factory: factory) }.record(value)
  }

  /// `mirror` for a value with a fraction (seconds).
  func mirror(_ name: String, _ value: Double) {
    cached(&mirrored, name) { CoreMetrics.Gauge(label: name, dimensions: [], factory: factory) }.record(value)
  }

  private var advanced: [String: Int64] = [:]

  /// Advances a counter mirrored from a running total of the core (`name` with labels).
  func mirrorCounter(_ name: String, labels: [(String, String)] = [], _ total: UInt64) {
    let key = Self.key(name, labels)
    let counter = cached(&mirroredCounters, key) {
      CoreMetrics.Counter(label: name, dimensions: labels, factory: factory)
    }
    advance(counter, key: key, to: total)
  }

  private static func key(_ name: String, _ labels: [(String, String)]) -> String {
    name + labels.map { "|\($0.0)=\($0.1)" }.joined()
  }

  /// The metric registered under `key`, created on first use (metrics are registered once).
  private func cached<M>(_ table: inout [String: M], _ key: String, _ make: () -> M) -> M {
    if let m = table[key] { return m }
    let m = make()
    table[key] = m
    return m
  }

  /// Advances a counter to a running total kept elsewhere (the loop counts bytes
  /// with plain integers; an atomic increment per write would sit on the hot path).
  func advance(_ counter: CoreMetrics.Counter, key: String, to total: UInt64) {
    let value = Int64(clamping: total)
    let delta = value - (advanced[key] ?? 0)
    if delta > 0 { counter.increment(by: delta) }
    advanced[key] = value
  }

  func exposition() -> [UInt8] { registry.emitToBuffer() }
}
