/// One outbound HTTP request (webhooks, push providers).
public struct HTTPRequest: Sendable {
  public var method: String
  /// `http://` or `https://` with a host (see `HTTPClient.checkURL`).
  public var url: String
  /// Sent as given, in order; `Content-Length` and `Host` are added by the client.
  public var headers: [(String, String)]
  public var body: [UInt8]
  /// Bound on the whole request, connect included (`CURLOPT_TIMEOUT_MS`).
  public var timeoutMs: Int
  /// Negotiate HTTP/2 over TLS (ALPN `h2`) and wait for a multiplexable connection
  /// rather than open a second one (APNs wants one long-lived HTTP/2 connection).
  /// Otherwise HTTP/1.1, connections kept alive and reused.
  public var preferHTTP2: Bool
  /// Which response headers the result carries: all of them, or only those named
  /// (lower-case). A caller that reads one header (a push reads `retry-after`) saves
  /// building every other one.
  public var responseHeaders: ResponseHeaders

  public init(
    method: String, url: String, headers: [(String, String)] = [], body: [UInt8] = [], timeoutMs: Int = 10_000,
    preferHTTP2: Bool = false, responseHeaders: ResponseHeaders = .all
  ) {
    self.method = method
    self.url = url
    self.headers = headers
    self.body = body
    self.timeoutMs = timeoutMs
    self.preferHTTP2 = preferHTTP2
    self.responseHeaders = responseHeaders
  }
}

/// The response headers a request keeps (`HTTPRequest.responseHeaders`).
public enum ResponseHeaders: Sendable {
  case all
  /// Only these names, compared case-insensitively (RFC 9110 §5.1); give them in lower case.
  case only([String])
}

/// Why a request got no HTTP response.
public struct HTTPFailure: Error, Sendable, CustomStringConvertible {
  public enum Kind: Sendable {
    /// `timeoutMs` (or the connect timeout) passed.
    case timeout
    /// The host name did not resolve.
    case resolve
    /// No connection (unreachable, reset while connecting).
    case connect
    /// The TLS handshake or the peer's certificate failed.
    case tls
    /// The response passed `maxResponseBytes`.
    case tooLarge
    /// The server refused the connection (`ECONNREFUSED`).
    case refused
    /// `HTTPClient.close()` ended it.
    case cancelled
    /// Anything else (a malformed response, a connection lost mid-response, …).
    case other
  }

  public let kind: Kind
  public let message: String

  public init(kind: Kind, message: String) {
    self.kind = kind
    self.message = message
  }

  public var description: String { "\(kind): \(message)" }
}

/// How a request ended: any HTTP status is a response (the caller decides what a
/// 4xx or 5xx means), everything else a failure.
public enum HTTPResult: Sendable {
  case response(status: Int, headers: [(String, String)], body: [UInt8])
  case failure(HTTPFailure)
}

/// Bounds and trust of one `HTTPClient` (DESIGN.md: every queue has a named limit).
public struct HTTPClientSettings: Sendable {
  /// PEM file of extra trust roots (`--tls-ca-file`), added to the system's roots.
  public var caFile: String?
  /// Requests in flight at once; `send` refuses more.
  public var maxInFlight: Int
  /// Request body bytes in flight at once; `send` refuses a request past it.
  public var maxInFlightBytes: Int
  /// Response body bytes kept per request; past it the request fails `.tooLarge`.
  public var maxResponseBytes: Int
  /// Bound on resolving + connecting + the TLS handshake of one connection.
  public var connectTimeoutMs: Int
  /// Connections open to one host at once (HTTP/2 requests share one).
  public var maxConnectionsPerHost: Int
  /// HTTP/2 streams open at once on one connection (`CURLMOPT_MAX_CONCURRENT_STREAMS`;
  /// the server's SETTINGS_MAX_CONCURRENT_STREAMS, RFC 7540 §6.5.2, lowers it further).
  /// libcurl's own default is 100, which caps a single provider connection.
  public var maxStreamsPerConnection: Int

  public init(
    caFile: String? = nil, maxInFlight: Int = 1_024, maxInFlightBytes: Int = 16 << 20, maxResponseBytes: Int = 64 << 10,
    connectTimeoutMs: Int = 5_000, maxConnectionsPerHost: Int = 8, maxStreamsPerConnection: Int = 100
  ) {
    self.caFile = caFile
    self.maxInFlight = maxInFlight
    self.maxInFlightBytes = maxInFlightBytes
    self.maxResponseBytes = maxResponseBytes
    self.connectTimeoutMs = connectTimeoutMs
    self.maxConnectionsPerHost = maxConnectionsPerHost
    self.maxStreamsPerConnection = maxStreamsPerConnection
  }
}

/// Why an `HTTPClient` could not be made (startup: exit 64).
public struct HTTPClientError: Error, Sendable, CustomStringConvertible {
  public let message: String
  public init(_ message: String) { self.message = message }
  public var description: String { message }
}
