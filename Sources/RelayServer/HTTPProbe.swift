import EventLoop

/// `relay probe URL`: one bounded HTTP GET, for container health checks in an image
/// with no curl, run without a shell (docker/Dockerfile's HEALTHCHECK, an exec probe).
/// It reuses the webhook's HTTP attempt: plain HTTP, an IP literal or `localhost`, the
/// status line only.
public enum HTTPProbe {
  /// The status code of `GET url`, or a reason it could not be had within `timeoutMs`.
  public static func get(_ url: String, timeoutMs: UInt64) -> Result<Int, ProbeFailure> {
    guard let endpoint = WebhookEndpoint.parse(url) else {
      return .failure(ProbeFailure(reason: "not an http://HOST[:PORT]/PATH URL: \(url)"))
    }
    let request =
      "GET \(endpoint.path) HTTP/1.1\r\nHost: \(endpoint.authority)\r\n"
      + "User-Agent: relay-probe\r\nConnection: close\r\n\r\n"
    var settings = WebhookSettings()
    settings.connectTimeoutMs = timeoutMs
    settings.responseTimeoutMs = timeoutMs
    let loop = Loop()
    defer { loop.close() }
    var outcome = WebhookAttemptResult.failed("no answer")
    let attempt = WebhookAttempt(loop: loop, request: Array(request.utf8), settings: settings) { outcome = $0 }
    attempt.start(endpoint)
    loop.run()
    switch outcome {
    case .status(let code): return .success(code)
    case .failed(let why): return .failure(ProbeFailure(reason: why))
    }
  }
}

/// Why a probe got no status code.
public struct ProbeFailure: Error, CustomStringConvertible {
  public let reason: String
  public var description: String { reason }
}
