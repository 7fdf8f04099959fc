import OutboundHTTP
public import RelayCrypto
public import RelayPush

/// The push providers the relay sends to (§9a flags), checked at start: a setting
/// that cannot work is a `PushSettingError` (the command line exits 64), never a
/// push service that silently sends nothing.
public struct PushSettings: Sendable {
  /// APNs token auth: the `.p8` key (ES256) and what the JWT and requests name.
  public struct APNs: Sendable {
    public let key: SigningKey
    public let settings: APNsSettings
    /// Age at which the provider token is renewed (`--apns-token-max-age-ms`, a test
    /// flag; production keeps `APNsProviderToken.defaultMaxAgeMs`).
    public var tokenMaxAgeMs: Int64
  }

  /// FCM HTTP v1: the service account (its RS256 key) and the API's base URL.
  public struct FCM: Sendable {
    public let credentials: FCMCredentials
    public let key: SigningKey
    public let baseURL: String
  }

  public var apns: APNs?
  public var fcm: FCM?
  /// Jobs held at once (waiting, in flight, waiting to retry); past it new jobs are
  /// dropped and counted (`relay_push_sent_total{result="dropped"}`).
  public var maxQueued = 20_000
  /// Requests in flight at once over all providers.
  public var maxInFlight = 1_000
  /// Bound on one request, connect included; a ring's retries stop at `expiresAt`.
  public var requestTimeoutMs = 10_000

  public init(apns: APNs? = nil, fcm: FCM? = nil) {
    self.apns = apns
    self.fcm = fcm
  }

  /// APNs from the flags: all of key, key id, team id and topic, or none of them.
  public static func apns(
    keyPEM: String?, keyId: String?, teamId: String?, topic: String?, url: String, sandboxURL: String,
    tokenMaxAgeMs: Int64?
  ) throws(PushSettingError) -> APNs? {
    let named = [("--apns-key-id", keyId), ("--apns-team-id", teamId), ("--apns-topic", topic)]
    guard let keyPEM else {
      if let given = named.first(where: { $0.1 != nil }) {
        throw PushSettingError("\(given.0) needs --apns-key-file (the .p8 key)")
      }
      return nil
    }
    for (flag, value) in named where value?.isEmpty ?? true {
      throw PushSettingError("--apns-key-file needs \(flag)")
    }
    let key: SigningKey
    do { key = try SigningKey(pem: keyPEM) } catch { throw PushSettingError("--apns-key-file: \(error)") }
    guard key.algorithm == .es256 else { throw PushSettingError("--apns-key-file: not an EC P-256 (.p8) key") }
    try check(url, "--apns-url")
    try check(sandboxURL, "--apns-sandbox-url")
    if let age = tokenMaxAgeMs, age < 1 { throw PushSettingError("--apns-token-max-age-ms must be positive") }
    return APNs(
      key: key, settings: APNsSettings(keyId: keyId!, teamId: teamId!, topic: topic!, productionURL: url, sandboxURL: sandboxURL),
      tokenMaxAgeMs: tokenMaxAgeMs ?? APNsProviderToken.defaultMaxAgeMs)
  }

  /// FCM from `--fcm-credentials` (the file's bytes) and `--fcm-url`.
  public static func fcm(credentialsJSON: [UInt8], url: String) throws(PushSettingError) -> FCM {
    let credentials: FCMCredentials
    switch FCMCredentials.parse(credentialsJSON) {
    case .success(let c): credentials = c
    case .failure(let error): throw PushSettingError("--fcm-credentials: \(error)")
    }
    let key: SigningKey
    do { key = try SigningKey(pem: credentials.privateKey) } catch {
      throw PushSettingError("--fcm-credentials: private_key: \(error)")
    }
    guard key.algorithm == .rs256 else { throw PushSettingError("--fcm-credentials: private_key is not an RSA key") }
    try check(credentials.tokenURI, "--fcm-credentials token_uri")
    try check(url, "--fcm-url")
    return FCM(credentials: credentials, key: key, baseURL: url)
  }

  private static func check(_ url: String, _ name: String) throws(PushSettingError) {
    if let why = HTTPClient.checkURL(url) { throw PushSettingError("\(name) \(url): \(why)") }
  }
}
