import OutboundHTTP
import RelayCrypto

/// How one webhook request looks on the wire (contract §11).
enum WebhookRequest {
  /// A signed POST of `body`: `X-Relay-Event`, and `X-Relay-Signature: sha256=<hex
  /// HMAC-SHA256(body, secret)>` over the exact body bytes.
  static func make(
    url: String, event: String, body: [UInt8], secret: [UInt8], attempt: Int, timeoutMs: Int
  ) -> HTTPRequest {
    let signature = Crypto.hex(Crypto.hmacSHA256(key: secret, message: body))
    let headers = [
      ("Content-Type", "application/json"), ("X-Relay-Event", event), ("X-Relay-Signature", "sha256=\(signature)"),
      ("X-Relay-Attempt", "\(attempt)"), ("User-Agent", "relay"),
    ]
    return HTTPRequest(method: "POST", url: url, headers: headers, body: body, timeoutMs: timeoutMs)
  }
}

/// How one attempt ended, as the retry rule sees it.
enum WebhookOutcome: Equatable {
  /// 2xx: delivered.
  case delivered
  /// Another 4xx than 408/429: the receiver refused this event; sending it again would
  /// not change that.
  case refused(Int)
  /// 5xx, 408, 429, no connection, no answer in time: worth another attempt.
  case retry(String)

  init(_ result: HTTPResult) {
    switch result {
    case .response(let status, _, _) where (200..<300).contains(status): self = .delivered
    case .response(let status, _, _) where status < 500 && status != 408 && status != 429: self = .refused(status)
    case .response(let status, _, _): self = .retry("status \(status)")
    case .failure(let failure): self = .retry("\(failure)")
    }
  }
}

extension ServerConfig {
  /// Why the outbound settings cannot work (`--webhook-url`, `--tls-ca-file`), or nil:
  /// the relay refuses to start on them (exit 64) rather than run without webhooks.
  public func outboundSettingsProblem() -> String? {
    if let url = webhookURL, let why = HTTPClient.checkURL(url) {
      return "--webhook-url \(url): \(why)"
    }
    if let file = tlsCAFile {
      do {
        _ = try HTTPClient.checkTrustFile(file)
      } catch {
        return "--tls-ca-file: \(error)"
      }
    }
    return nil
  }
}
