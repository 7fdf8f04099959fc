// Provider credentials as state with time as an input: when to sign a new APNs
// provider token, when to fetch a new FCM access token.
public import RelayProtocol

/// The APNs provider token (an ES256 JWT, header `kid`, claims `iss` and `iat`).
/// APNs refuses one older than an hour (403 ExpiredProviderToken) and answers 429
/// TooManyProviderTokenUpdates to a sender that renews more often than every 20
/// minutes, so a token is reused for `maxAgeMs` (default 50 minutes: inside both
/// bounds with room for clock skew) and renewed after it.
public struct APNsProviderToken: Sendable {
  public static let defaultMaxAgeMs: Int64 = 50 * 60_000
  /// Voluntary renewals never come closer than this (Apple's lower bound).
  public static let minimumAgeMs: Int64 = 20 * 60_000

  public let keyId: String
  public let teamId: String
  /// Age (ms of the monotonic clock) at which the token is renewed. Production keeps
  /// the default; `--apns-token-max-age-ms` shortens it for tests.
  public let maxAgeMs: Int64
  public private(set) var current: String?
  public private(set) var issuedAtMonoMs: Int64 = 0
  /// Tokens signed so far (a metric and a test hook).
  public private(set) var signed = 0

  public init(keyId: String, teamId: String, maxAgeMs: Int64 = defaultMaxAgeMs) {
    self.keyId = keyId
    self.teamId = teamId
    self.maxAgeMs = maxAgeMs
  }

  /// The token to send now: the current one while younger than `maxAgeMs`, else a
  /// new one signed with `signature` (the `.p8` key's ES256).
  public mutating func token(nowMonoMs: Int64, nowWallMs: Int64, signature: ([UInt8]) -> [UInt8]) -> String {
    if let current, nowMonoMs - issuedAtMonoMs < maxAgeMs { return current }
    var header = JSONObject()
    header.append("alg", .string("ES256"))
    header.append("kid", .string(keyId))
    var claims = JSONObject()
    claims.append("iss", .string(teamId))
    claims.append("iat", .number(JSONNumber(nowWallMs / 1000)))
    let token = JWT.sign(header: header, claims: claims, signature: signature)
    current = token
    issuedAtMonoMs = nowMonoMs
    signed += 1
    return token
  }

  /// APNs called the token expired (clock skew, a suspended process): drop it so
  /// the next push signs a new one, unless it is younger than Apple's lower bound,
  /// in which case a new token would only earn TooManyProviderTokenUpdates.
  /// Returns whether it was dropped.
  @discardableResult
  public mutating func expire(nowMonoMs: Int64) -> Bool {
    guard current != nil, nowMonoMs - issuedAtMonoMs >= min(Self.minimumAgeMs, maxAgeMs) else { return false }
    current = nil
    return true
  }
}

/// The FCM OAuth2 access token: used until `refreshMarginMs` before it expires
/// (a tenth of its lifetime, at most a minute), then fetched again. At most one
/// fetch runs at a time; pushes wait for it.
public struct OAuthTokenCache: Sendable {
  public private(set) var token: String?
  public private(set) var expiresAtMonoMs: Int64 = 0
  public private(set) var refreshAtMonoMs: Int64 = 0
  /// A fetch is under way.
  public private(set) var fetching = false
  /// Tokens fetched so far.
  public private(set) var fetched = 0

  public init() {}

  /// The token if still fresh at `nowMonoMs`.
  public func valid(nowMonoMs: Int64) -> String? {
    guard let token, nowMonoMs < refreshAtMonoMs else { return nil }
    return token
  }

  /// Whether to start a fetch now (none under way and no fresh token).
  public mutating func beginFetch(nowMonoMs: Int64) -> Bool {
    guard !fetching, valid(nowMonoMs: nowMonoMs) == nil else { return false }
    fetching = true
    return true
  }

  /// The fetch answered with a token living `expiresInMs`.
  public mutating func fetchSucceeded(token: String, expiresInMs: Int64, nowMonoMs: Int64) {
    self.token = token
    expiresAtMonoMs = nowMonoMs + expiresInMs
    refreshAtMonoMs = expiresAtMonoMs - min(expiresInMs / 10, 60_000)
    fetching = false
    fetched += 1
  }

  public mutating func fetchFailed() { fetching = false }

  /// FCM answered 401: the token is no good whatever its age.
  public mutating func invalidate() {
    token = nil
    refreshAtMonoMs = 0
  }
}
