import EventLoop
import Logging
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
  var connectTimeoutMs: UInt64 = 2_000
  var responseTimeoutMs: UInt64 = 5_000
  /// Backoff before retry n (n ≥ 1): at least min(5 000, 200 · 2^(n−1)) ms, plus up
  /// to half of that again as random jitter, so many relays do not retry in step.
  /// A receiver that answered 5xx gets that floor to recover; the ceiling (1.5 ×
  /// the floor) is what `Backoff` doubles.
  var backoff = Backoff(baseMs: 300, capMs: 7_500, floor: (2, 3))
  /// Bytes of the response read while looking for the status line.
  var maxResponseBytes = 8_192
}

/// Delivers the core's `.webhook` effects as signed HTTP POSTs on the relay's own loop.
/// Nothing here blocks: connects, writes and reads are libuv callbacks, and each event
/// is bounded in time (timeouts × attempts) and in memory (queue cap).
final class WebhookClient {
  private let loop: Loop
  private let endpoint: WebhookEndpoint
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

  init(loop: Loop, endpoint: WebhookEndpoint, secret: String, settings: WebhookSettings, metrics: ServerMetrics, logger: Logger) {
    self.loop = loop
    self.endpoint = endpoint
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
    closed = true
    queue.removeAll(keepingCapacity: false)
    for job in active { job.abort() }
    active.removeAll()
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
    let request = WebhookAttempt.request(
      endpoint: endpoint, event: job.event, body: job.body, secret: secret, attempt: job.attempts)
    let attempt = WebhookAttempt(loop: loop, request: request, settings: settings) { [unowned self, job] result in
      job.current = nil
      self.completed(job, result)
    }
    job.current = attempt
    attempt.start(endpoint)
  }

  private func completed(_ job: WebhookJob, _ result: WebhookAttemptResult) {
    guard !closed else { return }
    switch result {
    case .status(let code) where (200..<300).contains(code):
      metrics.webhookSent.increment()
      done(job)
    case .status(let code) where code < 500 && code != 408 && code != 429:
      // The receiver refused this event; sending it again would not change that.
      metrics.webhookFailed.increment()
      logger.warning("webhook refused", metadata: ["event": "\(job.event)", "status": "\(code)"])
      done(job)
    default:
      guard job.attempts < settings.maxAttempts else {
        metrics.webhookFailed.increment()
        logger.warning("webhook gave up", metadata: ["event": "\(job.event)", "attempts": "\(job.attempts)", "last": "\(result)"])
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
  var current: WebhookAttempt?
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

  func abort() {
    backoff?.close()
    backoff = nil
    current?.cancel()
    current = nil
  }
}
