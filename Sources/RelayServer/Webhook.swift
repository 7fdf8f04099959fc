import EventLoop
import Logging
import OutboundHTTP
import RelayCore
import RelayCrypto
import CoreMetrics
import RelayPrimitives

/// Limits of the webhook client (contract §11: retried with backoff, bounded, counted;
/// DESIGN.md: every queue has a named limit). The contract fixes no flags for these.
struct WebhookSettings {
  /// Events waiting for a delivery slot; beyond it new events are dropped and counted.
  var maxQueued = 1_000
  /// Deliveries in flight at once (each holds its slot through its retries).
  var maxConcurrent = 4
  /// Attempts per event, the first included.
  var maxAttempts = 4
  var connectTimeoutMs = 2_000
  /// Bound on one attempt, connect included.
  var requestTimeoutMs = 5_000
  /// Backoff before retry n (n ≥ 1): at least min(5 000, 200 · 2^(n−1)) ms, plus up
  /// to half of that again as random jitter, so many relays do not retry in step.
  /// A receiver that answered 5xx gets that floor to recover; the ceiling (1.5 ×
  /// the floor) is what `Backoff` doubles.
  var backoff = Backoff(baseMs: 300, capMs: 7_500, floor: (2, 3))
  /// Response bytes read; a receiver's answer is only its status.
  var maxResponseBytes = 64 << 10

  /// The HTTP client's bounds for these settings (`caFile`: `--tls-ca-file`).
  func http(caFile: String?) -> HTTPClientSettings {
    HTTPClientSettings(
      caFile: caFile, maxInFlight: maxConcurrent, maxResponseBytes: maxResponseBytes,
      connectTimeoutMs: connectTimeoutMs, maxConnectionsPerHost: maxConcurrent)
  }
}

/// Delivers the core's `.webhook` effects as signed HTTP POSTs over the relay's
/// outbound HTTP client (OutboundHTTP: `http://` or `https://`, names resolved per
/// connection, connections kept). Nothing here blocks, and each event is bounded in
/// time (timeouts × attempts) and in memory (queue cap).
final class WebhookClient {
  private let url: String
  private let http: HTTPClient
  private let loop: Loop
  private let secret: [UInt8]
  let settings: WebhookSettings
  private let metrics: ServerMetrics
  private let logger: Logger
  /// FIFO of waiting events.
  private var queue = FIFOQueue<WebhookJob>()
  private var active: [WebhookJob] = []
  private var closed = false
  /// Backoff jitter, seeded once from OpenSSL's CSPRNG so relays differ.
  private var jitter = SeededRandom(seed: Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })

  init(
    loop: Loop, url: String, secret: String, caFile: String?, settings: WebhookSettings, metrics: ServerMetrics,
    logger: Logger
  ) throws {
    self.loop = loop
    self.url = url
    http = try HTTPClient(loop: loop, settings: settings.http(caFile: caFile))
    self.secret = Array(secret.utf8)
    self.settings = settings
    self.metrics = metrics
    self.logger = logger
  }

  /// Queues one event; dropped (and counted) when the queue is full.
  func enqueue(event: String, body: Payload) {
    guard !closed else { return }
    guard queued < settings.maxQueued else {
      metrics.webhookDropped.increment()
      logger.debug("webhook queue full; event dropped", metadata: ["event": "\(event)"])
      return
    }
    queue.append(WebhookJob(event: event, body: body.bytes))
    pump()
  }

  /// Shutdown: drops queued events and aborts those in flight so the loop can end.
  func close() {
    guard !closed else { return }
    closed = true
    queue.removeAll(keepingCapacity: false)
    for job in active { job.stopWaiting() }
    active.removeAll()
    http.close()
  }

  private func pump() {
    while active.count < settings.maxConcurrent, let job = queue.popFirst() {
      active.append(job)
      attempt(job)
    }
  }

  /// Events waiting for a slot.
  var queued: Int { queue.count }

  private func attempt(_ job: WebhookJob) {
    job.attempts += 1
    let request = WebhookRequest.make(
      url: url, event: job.event, body: job.body, secret: secret, attempt: job.attempts,
      timeoutMs: settings.requestTimeoutMs)
    let sent = http.send(request) { [unowned self, job] result in
      self.completed(job, WebhookOutcome(result))
    }
    // One slot per active job keeps the client under its bound; a refusal is only
    // possible while closing.
    if !sent { completed(job, .retry("not sent")) }
  }

  private func completed(_ job: WebhookJob, _ outcome: WebhookOutcome) {
    guard !closed else { return }
    switch outcome {
    case .delivered:
      metrics.webhookSent.increment()
      done(job)
    case .refused(let code):
      metrics.webhookFailed.increment()
      logger.warning("webhook refused", metadata: ["event": "\(job.event)", "status": "\(code)"])
      done(job)
    case .retry(let why):
      guard job.attempts < settings.maxAttempts else {
        metrics.webhookFailed.increment()
        logger.warning("webhook gave up", metadata: ["event": "\(job.event)", "attempts": "\(job.attempts)", "last": "\(why)"])
        return done(job)
      }
      metrics.webhookRetried.increment()
      job.wait(loop: loop, ms: backoffMs(afterAttempt: job.attempts)) { [unowned self, job] in
        guard !self.closed else { return }
        self.attempt(job)
      }
    }
  }

  /// Exponential backoff with jitter (see `WebhookSettings.backoff`).
  func backoffMs(afterAttempt n: Int) -> UInt64 {
    UInt64(settings.backoff.delayMs(attempt: n - 1, using: &jitter))
  }

  private func done(_ job: WebhookJob) {
    active.removeAll { $0 === job }
    pump()
  }
}

/// One event on its way, across its attempts.
final class WebhookJob {
  let event: String
  let body: [UInt8]
  var attempts = 0
  private var backoff: EventLoop.Timer?

  init(event: String, body: [UInt8]) {
    self.event = event
    self.body = body
  }

  /// Runs `then` after `ms` on the loop (the retry backoff).
  func wait(loop: Loop, ms: UInt64, then: @escaping () -> Void) {
    let timer = EventLoop.Timer(loop: loop)
    backoff = timer
    timer.start(afterMs: ms) { [unowned self] in
      self.backoff?.close()
      self.backoff = nil
      then()
    }
  }

  func stopWaiting() {
    backoff?.close()
    backoff = nil
  }
}
