// The push providers' wire rules (PROTOCOL.md §9a) as pure functions: a `PushJob`
// from the core becomes one HTTP request; a provider's answer becomes one outcome.
// Time, keys and the HTTP client are the shell's (RelayServer's PushService).
public import RelayCore
public import RelayProtocol
import RelayPrimitives

/// Which provider a request goes to (the `provider` label of `relay_push_sent_total`).
public enum PushProvider: String, Sendable, CaseIterable {
  case apns, fcm

  public init(_ kind: PushKind) { self = kind == .fcm ? .fcm : .apns }
}

/// One request to a provider, ready for the HTTP client.
public struct PushRequest: Sendable, Equatable {
  public var method: String
  public var url: String
  /// Lower-case names (HTTP/2 requires them, RFC 7540 §8.1.2).
  public var headers: [Header]
  public var body: [UInt8]

  public struct Header: Sendable, Equatable {
    public let name: String
    public let value: String
    public init(_ name: String, _ value: String) {
      self.name = name
      self.value = value
    }
  }

  public init(method: String = "POST", url: String, headers: [Header], body: [UInt8]) {
    self.method = method
    self.url = url
    self.headers = headers
    self.body = body
  }

  public func header(_ name: String) -> String? { headers.first { $0.name == name }?.value }
}

/// What a provider's answer means for the job.
public enum PushOutcome: Sendable, Equatable {
  /// Accepted by the provider.
  case sent
  /// The token is dead (APNs 410, 400 BadDeviceToken/DeviceTokenNotForTopic; FCM 404
  /// UNREGISTERED, 400 on the token): remove the registration everywhere (§9a).
  case tokenGone(reason: String)
  /// Try again later (429, 5xx, a timeout, a refused stream); `afterMs` from the
  /// provider's `retry-after` when it sent one.
  case retry(reason: String, afterMs: Int64?)
  /// Our credentials were refused as expired (APNs 403 ExpiredProviderToken, FCM
  /// 401): renew them, then retry.
  case renewCredentials(reason: String)
  /// Any other refusal: retrying the same request cannot help.
  case failed(reason: String)

  /// The `result` label of `relay_push_sent_total`.
  public var label: String {
    switch self {
    case .sent: "sent"
    case .tokenGone: "token_gone"
    case .retry: "retry"
    case .renewCredentials: "auth"
    case .failed: "failed"
    }
  }
}

/// Answer parsing both providers share.
enum Answer {
  /// `retry-after` as delay-seconds (RFC 9110 §10.2.3); an HTTP-date is ignored (the
  /// pure code has no clock to subtract it from; the backoff applies instead).
  static func retryAfterMs(_ headers: [(String, String)]) -> Int64? {
    guard let value = headers.first(where: { $0.0.lowercased() == "retry-after" })?.1,
      let seconds = Int64(value.trimmingSpaces()), seconds >= 0, seconds <= 86_400
    else { return nil }
    return seconds * 1000
  }

  /// 429 and 5xx: the provider is busy or failing, not refusing this push.
  static func isTransient(_ status: Int) -> Bool { status == 429 || (500...599).contains(status) }
}
