import EventLoop
import OutboundHTTP

/// `relay probe URL`: one bounded HTTP GET, for container health checks in an image
/// with no curl, run without a shell (docker/Dockerfile's HEALTHCHECK, an exec probe).
/// It goes through the relay's own outbound HTTP client (OutboundHTTP), on a loop of
/// its own that ends with the request.
public enum HTTPProbe {
  /// The status code of `GET url`, or a reason it could not be had within `timeoutMs`.
  public static func get(_ url: String, timeoutMs: UInt64) -> Result<Int, ProbeFailure> {
    if let why = HTTPClient.checkURL(url) { return .failure(ProbeFailure(reason: why)) }
    let loop = Loop()
    defer { loop.close() }
    let client: HTTPClient
    do {
      client = try HTTPClient(loop: loop, settings: HTTPClientSettings(maxInFlight: 1, connectTimeoutMs: Int(timeoutMs)))
    } catch {
      return .failure(ProbeFailure(reason: "\(error)"))
    }
    var outcome: Result<Int, ProbeFailure> = .failure(ProbeFailure(reason: "no answer"))
    let request = HTTPRequest(method: "GET", url: url, headers: [("User-Agent", "relay-probe")], timeoutMs: Int(timeoutMs))
    let started = client.send(request) { result in
      switch result {
      case .response(let status, _, _): outcome = .success(status)
      case .failure(let failure): outcome = .failure(ProbeFailure(reason: failure.message))
      }
      client.close()
    }
    if started { loop.run() } else { client.close() }
    return outcome
  }
}

/// Why a probe got no status code.
public struct ProbeFailure: Error, CustomStringConvertible {
  public let reason: String
  public var description: String { reason }
}
