import EventLoop
import RelayCrypto

/// Where webhooks go: `http://HOST[:PORT]/path` (contract §11). Plain HTTP only; the
/// host is an IP literal, `localhost`, or a name resolved once at start.
struct WebhookEndpoint: Equatable {
  var host: String
  var port: Int
  var path: String
  /// The `Host` header value as written in the URL.
  var authority: String

  /// Parses the URL; nil for anything but `http://` with a valid port.
  static func parse(_ url: String) -> WebhookEndpoint? {
    let scheme = "http://"
    guard url.lowercased().hasPrefix(scheme) else { return nil }
    let rest = url.dropFirst(scheme.count)
    let slash = rest.firstIndex(of: "/") ?? rest.endIndex
    let authority = String(rest[..<slash])
    let path = slash == rest.endIndex ? "/" : String(rest[slash...])
    var host = authority
    var port = 80
    if let colon = authority.lastIndex(of: ":"), !authority.hasSuffix("]") {
      guard let p = Int(authority[authority.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
      host = String(authority[..<colon])
    }
    if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
    guard !host.isEmpty, !path.contains(" ") else { return nil }
    return WebhookEndpoint(host: host == "localhost" ? "127.0.0.1" : host, port: port, path: path, authority: authority)
  }
}

/// How one HTTP attempt ended.
enum WebhookAttemptResult: Equatable {
  /// The receiver answered with this status code.
  case status(Int)
  /// No connection, no answer in time, or the connection ended before a status line.
  case failed(String)
}

/// One HTTP/1.1 POST on the relay's own loop: connect, write, read the status line,
/// close. Both phases are bounded by a timer, so a receiver that never answers costs
/// one idle socket for `responseTimeoutMs` and nothing else (contract §11: a slow or
/// dead webhook never slows the relay).
final class WebhookAttempt {
  private let loop: Loop
  private let request: [UInt8]
  private let settings: WebhookSettings
  private var completion: ((WebhookAttemptResult) -> Void)?
  private var timer: EventLoop.Timer?
  private var connection: TCPConnection?
  private var response: [UInt8] = []

  init(loop: Loop, request: [UInt8], settings: WebhookSettings, completion: @escaping (WebhookAttemptResult) -> Void) {
    self.loop = loop
    self.request = request
    self.settings = settings
    self.completion = completion
  }

  /// Starts the attempt; `completion` runs exactly once, never from inside `start`.
  func start(_ endpoint: WebhookEndpoint) {
    arm(settings.connectTimeoutMs, "connect timeout")
    TCPConnector.connect(loop: loop, host: endpoint.host, port: endpoint.port) { [self] result in
      switch result {
      case .failure(let error):
        // An invalid address fails inside `connect`; defer so callers never re-enter.
        arm(0, "connect failed: \(error)")
      case .success(let tcp):
        connected(tcp)
      }
    }
  }

  /// Aborts without a result (shutdown): the completion is dropped.
  func cancel() {
    completion = nil
    finish(.failed("cancelled"))
  }

  private func connected(_ tcp: TCPConnection) {
    guard completion != nil else { return tcp.close() }  // timed out meanwhile
    connection = tcp
    arm(settings.responseTimeoutMs, "no response in time")
    tcp.onRead = { [self] bytes in received(bytes) }
    tcp.onClose = { [self] _ in finish(.failed("closed before a status line")) }
    tcp.startReading()
    if !tcp.write(request) { finish(.failed("request not written")) }
  }

  private func received(_ bytes: UnsafeRawBufferPointer) {
    response.append(contentsOf: bytes.prefix(max(0, settings.maxResponseBytes - response.count)))
    if let status = Self.statusCode(response) {
      finish(.status(status))
    } else if response.count >= settings.maxResponseBytes || response.contains(UInt8(ascii: "\n")) {
      finish(.failed("malformed response"))
    }
  }

  /// `HTTP/1.x NNN …` once the status line is complete.
  static func statusCode(_ bytes: [UInt8]) -> Int? {
    guard let end = bytes.firstIndex(of: UInt8(ascii: "\n")) else { return nil }
    var line = Substring(String(decoding: bytes[..<end], as: UTF8.self))
    if line.last == "\r" { line = line.dropLast() }
    let parts = line.split(separator: " ", maxSplits: 2)
    guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let code = Int(parts[1]) else { return nil }
    return code
  }

  /// (Re)arms the one timer of the attempt; when it fires the attempt fails with `why`.
  private func arm(_ ms: UInt64, _ why: String) {
    let t = timer ?? EventLoop.Timer(loop: loop)
    timer = t
    t.start(afterMs: ms) { [self] in finish(.failed(why)) }
  }

  private func finish(_ result: WebhookAttemptResult) {
    timer?.close()
    timer = nil
    if let tcp = connection {
      connection = nil
      tcp.onRead = nil
      tcp.onClose = nil
      tcp.close()
    }
    guard let done = completion else { return }
    completion = nil
    done(result)
  }
}

extension WebhookAttempt {
  /// The request bytes: `X-Relay-Event`, and `X-Relay-Signature: sha256=<hex
  /// HMAC-SHA256(body, secret)>` over the exact body bytes (contract §11).
  static func request(
    endpoint: WebhookEndpoint, event: String, body: [UInt8], secret: [UInt8], attempt: Int
  ) -> [UInt8] {
    let signature = Crypto.hex(Crypto.hmacSHA256(key: secret, message: body))
    let head =
      "POST \(endpoint.path) HTTP/1.1\r\n" + "Host: \(endpoint.authority)\r\n"
      + "Content-Type: application/json\r\n" + "Content-Length: \(body.count)\r\n"
      + "X-Relay-Event: \(event)\r\n" + "X-Relay-Signature: sha256=\(signature)\r\n"
      + "X-Relay-Attempt: \(attempt)\r\n" + "User-Agent: relay\r\n" + "Connection: close\r\n\r\n"
    return Array(head.utf8) + body
  }
}
