import EventLoop
import Logging
import OutboundHTTP
import Prometheus
import RelayCore
import RelayCrypto
import RelayPrimitives
import RelayProtocol
import RelayPush

/// Performs the core's `Effect.push` jobs (§9a) over the outbound HTTP client, on the
/// relay's loop: APNs over one long-lived HTTP/2 connection per environment, FCM with
/// a cached OAuth2 token. Every job is bounded: held jobs by `maxQueued` (more are
/// dropped and counted), requests in flight by `maxInFlight`, each request by a
/// timeout, and its retries by the ring's `expiresAt`, so a dead or black-holed
/// provider costs memory within those bounds and never a loop turn.
final class PushService {
  /// One job and its progress.
  final class Pending {
    let job: PushJob
    let provider: PushProvider
    let startedNs: UInt64
    let deadlineWallMs: Int64
    var attempt = 0

    init(job: PushJob, startedNs: UInt64, deadlineWallMs: Int64) {
      self.job = job
      provider = PushProvider(job.target.kind)
      self.startedNs = startedNs
      self.deadlineWallMs = deadlineWallMs
    }
  }

  private let loop: Loop
  private let http: HTTPClient
  let settings: PushSettings
  private let logger: Logger
  /// A provider called `token` of `uid` dead: the server removes it everywhere.
  private let tokenGone: (_ uid: String, _ token: String) -> Void
  /// `relay_push_seconds`: from the ring (the job's arrival) to the provider's answer.
  private let observeSeconds: (Double) -> Void
  private var apnsToken: APNsProviderToken?
  private var oauth = OAuthTokenCache()
  private var waitingForOAuth: [Pending] = []
  private var ready = FIFOQueue<Pending>()
  private var retryTimers: [ObjectIdentifier: EventLoop.Timer] = [:]
  private var inFlight = 0
  private let pumpTimer: EventLoop.Timer
  private var pumpScheduled = false
  /// Jobs held: ready, in flight, waiting for a token or a retry.
  private(set) var held = 0
  private var closed = false
  private var jitter = SeededRandom(seed: Crypto.randomBytes(8).reduce(UInt64(0)) { $0 << 8 | UInt64($1) })
  /// `relay_push_sent_total{provider, result}` as running totals ("apns|sent" → n).
  private(set) var counts: [String: UInt64] = [:]
  /// APNs provider tokens signed and FCM access tokens fetched (metrics, tests).
  var apnsTokensSigned: Int { apnsToken?.signed ?? 0 }
  var fcmTokensFetched: Int { oauth.fetched }
  private var warnings = WarningLimiter()

  init(
    loop: Loop, settings: PushSettings, caFile: String?, logger: Logger,
    tokenGone: @escaping (String, String) -> Void, observeSeconds: @escaping (Double) -> Void
  ) throws {
    self.loop = loop
    self.settings = settings
    self.logger = logger
    self.tokenGone = tokenGone
    self.observeSeconds = observeSeconds
    // One connection per provider host: APNs asks senders to keep one HTTP/2
    // connection open rather than open one per push; as many streams on it as
    // requests may be in flight (the provider's SETTINGS_MAX_CONCURRENT_STREAMS,
    // RFC 7540 §6.5.2, may lower that). A push reads one response header.
    http = try HTTPClient(
      loop: loop,
      settings: HTTPClientSettings(
        caFile: caFile, maxInFlight: settings.maxInFlight + 8, maxInFlightBytes: 64 << 20,
        maxResponseBytes: 16 << 10, connectTimeoutMs: 5_000, maxConnectionsPerHost: 1,
        maxStreamsPerConnection: settings.maxInFlight))
    pumpTimer = EventLoop.Timer(loop: loop)
    if let apns = settings.apns {
      apnsToken = APNsProviderToken(keyId: apns.settings.keyId, teamId: apns.settings.teamId, maxAgeMs: apns.tokenMaxAgeMs)
    }
  }

  /// Takes one job; dropped and counted when `maxQueued` are held.
  func submit(_ job: PushJob) {
    guard !closed else { return }
    let provider = PushProvider(job.target.kind)
    guard held < settings.maxQueued else {
      count(provider, "dropped")
      warn(provider, "push queue full; job dropped")
      return
    }
    held += 1
    let wall = Loop.wallClockMs()
    ready.append(Pending(job: job, startedNs: Loop.hrtimeNs(), deadlineWallMs: PushRetry.deadlineWallMs(job, startedWallMs: wall)))
    pump()
  }

  /// Cancels everything (shutdown): nothing pending holds the exit.
  func close() {
    guard !closed else { return }
    closed = true
    for timer in retryTimers.values { timer.close() }
    retryTimers.removeAll()
    pumpTimer.close()
    ready.removeAll()
    waitingForOAuth.removeAll()
    http.close()
    held = 0
  }

  /// Starts ready jobs while the in-flight bound allows, at most `startsPerTurn` in
  /// one loop turn: a ring to thousands of devices must not become one long turn
  /// (protocol/ §16), so the rest start from a timer in the next turns.
  private func pump() {
    var started = 0
    while !closed, inFlight < settings.maxInFlight, started < Self.startsPerTurn, let pending = ready.popFirst() {
      attempt(pending)
      started += 1
    }
    guard !closed, !ready.isEmpty, inFlight < settings.maxInFlight, !pumpScheduled else { return }
    pumpScheduled = true
    pumpTimer.start(afterMs: 0) { [weak self] in
      self?.pumpScheduled = false
      self?.pump()
    }
  }

  /// Requests started per loop turn (each one a libcurl transfer set up and written).
  static let startsPerTurn = 64

  private func attempt(_ pending: Pending) {
    let nowWall = Loop.wallClockMs()
    guard nowWall < pending.deadlineWallMs else { return finish(pending, "expired") }
    let request: PushRequest
    switch pending.provider {
    case .apns:
      guard let apns = settings.apns, var token = apnsToken else { return unconfigured(pending) }
      let bearer = token.token(nowMonoMs: Int64(loop.nowMs), nowWallMs: nowWall, signature: apns.key.sign)
      apnsToken = token
      request = APNs.request(pending.job, settings: apns.settings, bearer: bearer)
    case .fcm:
      guard let fcm = settings.fcm else { return unconfigured(pending) }
      guard let access = oauth.valid(nowMonoMs: Int64(loop.nowMs)) else {
        waitingForOAuth.append(pending)
        return fetchAccessToken()
      }
      request = FCM.request(
        pending.job, baseURL: fcm.baseURL, projectId: fcm.credentials.projectId, accessToken: access, nowWallMs: nowWall)
    }
    let timeout = Int(min(Int64(settings.requestTimeoutMs), max(pending.deadlineWallMs - nowWall, 500)))
    inFlight += 1
    let started = http.send(Self.http(request, timeoutMs: timeout)) { [weak self] result in
      guard let self else { return }
      self.inFlight -= 1
      self.answered(pending, result)
      self.pump()
    }
    if !started {
      inFlight -= 1
      retry(pending, reason: "HTTP client full", afterMs: nil)
    }
  }

  private static func http(_ request: PushRequest, timeoutMs: Int) -> HTTPRequest {
    HTTPRequest(
      method: request.method, url: request.url, headers: request.headers.map { ($0.name, $0.value) }, body: request.body,
      timeoutMs: timeoutMs, preferHTTP2: true, responseHeaders: .only(["retry-after"]))
  }

  private func answered(_ pending: Pending, _ result: HTTPResult) {
    guard !closed else { return }
    let outcome: PushOutcome
    switch result {
    case .response(let status, let headers, let body):
      outcome = pending.provider == .apns
        ? APNs.outcome(status: status, headers: headers, body: body) : FCM.outcome(status: status, headers: headers, body: body)
    case .failure(let failure):
      guard failure.kind != .cancelled else { return finish(pending, nil) }
      count(pending.provider, "error")
      return retry(pending, reason: failure.description, afterMs: nil)
    }
    count(pending.provider, outcome.label)
    switch outcome {
    case .sent:
      finish(pending, nil)
    case .tokenGone(let reason):
      logger.info("push token gone", metadata: ["reason": "\(reason)", "uid": "\(pending.job.target.uid)"])
      tokenGone(pending.job.target.uid, pending.job.target.token)
      finish(pending, nil)
    case .retry(let reason, let afterMs):
      retry(pending, reason: reason, afterMs: afterMs)
    case .renewCredentials(let reason):
      if pending.provider == .apns { apnsToken?.expire(nowMonoMs: Int64(loop.nowMs)) } else { oauth.invalidate() }
      retry(pending, reason: reason, afterMs: nil)
    case .failed(let reason):
      warn(pending.provider, "push refused: \(reason)")
      finish(pending, nil)
    }
  }

  /// Tries `pending` again after the backoff, or gives it up when that would pass
  /// its deadline.
  private func retry(_ pending: Pending, reason: String, afterMs: Int64?) {
    let delay = PushRetry.delayMs(
      attempt: pending.attempt, retryAfterMs: afterMs, nowWallMs: Loop.wallClockMs(), deadlineWallMs: pending.deadlineWallMs,
      random: &jitter)
    guard let delay else {
      warn(pending.provider, "push given up at the ring's expiry: \(reason)")
      return finish(pending, "expired")
    }
    pending.attempt += 1
    let timer = EventLoop.Timer(loop: loop)
    let key = ObjectIdentifier(pending)
    retryTimers[key] = timer
    timer.start(afterMs: UInt64(delay)) { [weak self] in
      guard let self, let timer = self.retryTimers.removeValue(forKey: key) else { return }
      timer.close()
      self.ready.append(pending)
      self.pump()
    }
  }

  /// The job is done: `result` counted when it is not an answer already counted.
  private func finish(_ pending: Pending, _ result: String?) {
    if let result { count(pending.provider, result) }
    held -= 1
    observeSeconds(Double(Loop.hrtimeNs() &- pending.startedNs) / 1e9)
  }

  private func unconfigured(_ pending: Pending) {
    warn(pending.provider, "a \(pending.job.target.kind.rawValue) token is registered but \(pending.provider.rawValue) is not configured")
    finish(pending, "unconfigured")
  }

  private func count(_ provider: PushProvider, _ result: String) {
    counts[provider.rawValue + "|" + result, default: 0] += 1
  }

  private func warn(_ provider: PushProvider, _ message: String) {
    guard let suppressed = warnings.allow(provider.rawValue, nowMs: Int64(loop.nowMs)) else { return }
    logger.warning("\(message)", metadata: ["provider": "\(provider.rawValue)", "suppressed": "\(suppressed)"])
  }
}

extension PushService {
  /// Fetches an FCM access token (one fetch at a time); the jobs waiting for it go
  /// on when it arrives, or are retried with backoff when it does not.
  private func fetchAccessToken() {
    guard let fcm = settings.fcm, oauth.beginFetch(nowMonoMs: Int64(loop.nowMs)) else { return }
    let parts = FCM.assertionParts(fcm.credentials, nowWallMs: Loop.wallClockMs())
    let assertion = JWT.sign(header: parts.header, claims: parts.claims, signature: fcm.key.sign)
    var request = Self.http(FCM.tokenRequest(fcm.credentials, assertion: assertion), timeoutMs: settings.requestTimeoutMs)
    request.preferHTTP2 = false
    let started = http.send(request) { [weak self] result in self?.tokenAnswered(result) }
    if !started { tokenAnswered(.failure(HTTPFailure(kind: .other, message: "HTTP client full"))) }
  }

  private func tokenAnswered(_ result: HTTPResult) {
    guard !closed else { return }
    var why = ""
    switch result {
    case .response(200, _, let body):
      if let (token, lifetime) = FCM.accessToken(from: body) {
        oauth.fetchSucceeded(token: token, expiresInMs: lifetime, nowMonoMs: Int64(loop.nowMs))
      } else {
        why = "token answer without access_token/expires_in"
      }
    case .response(let status, _, let body):
      why = "token endpoint answered \(status): \(String(decoding: body.prefix(200), as: UTF8.self))"
    case .failure(let failure):
      why = "token endpoint: \(failure)"
    }
    let waiting = waitingForOAuth
    waitingForOAuth = []
    if why.isEmpty {
      for pending in waiting { ready.append(pending) }
      return pump()
    }
    oauth.fetchFailed()
    count(.fcm, "auth")
    warn(.fcm, why)
    for pending in waiting { retry(pending, reason: why, afterMs: nil) }
  }
}

extension RelayServer {
  /// The push service of `config.push` (PushService.swift); nil without providers.
  func makePushService() throws -> PushService? {
    guard let settings = config.push else { return nil }
    let histogram = metrics.pushSeconds
    return try PushService(
      loop: loop, settings: settings, caFile: config.tlsCAFile, logger: logger,
      tokenGone: { [unowned self] uid, token in self.pushTokenInvalid(uid: uid, token: token) },
      observeSeconds: { histogram.recordNanoseconds(Int64($0 * 1e9)) })
  }
}

/// At most one warning per key every `intervalMs`; the next one says how many were
/// held back (a provider that fails every push must not flood the log).
struct WarningLimiter {
  var intervalMs: Int64 = 10_000
  private var last: [String: (atMs: Int64, suppressed: Int)] = [:]

  /// nil: stay quiet; else log now, with this many suppressed since the last line.
  mutating func allow(_ key: String, nowMs: Int64) -> Int? {
    if let entry = last[key], nowMs - entry.atMs < intervalMs {
      last[key] = (entry.atMs, entry.suppressed + 1)
      return nil
    }
    let suppressed = last[key]?.suppressed ?? 0
    last[key] = (nowMs, 0)
    return suppressed
  }
}
