// Minimal HTTP/1.1 response serialization (RFC 7230 §3.1.2, §3.3.2).

/// Builds complete response bytes for the shell.
public enum HTTPResponse {
  /// "HTTP/1.1 <status> <reason>", the given headers, `Content-Length`
  /// (unless the status forbids a body, RFC 7230 §3.3.2, or the caller set
  /// one), `Connection: close` when `close`, an empty line and `body`.
  public static func make(
    status: Int, headers: [(String, String)] = [], body: [UInt8] = [], close: Bool = false
  ) -> [UInt8] {
    var text = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\n"
    var hasLength = false
    for (name, value) in headers {
      text += "\(name): \(value)\r\n"
      if HTTPRequestHead.namesEqual(name, "Content-Length") { hasLength = true }
    }
    let bodyAllowed = !(100...199).contains(status) && status != 204 && status != 304
    if bodyAllowed && !hasLength { text += "Content-Length: \(body.count)\r\n" }
    if close { text += "Connection: close\r\n" }
    text += "\r\n"
    var bytes = Array(text.utf8)
    if bodyAllowed { bytes.append(contentsOf: body) }
    return bytes
  }

  /// The reason phrase for the statuses the relay sends (RFC 7231 §6,
  /// RFC 6585 for 429/431).
  public static func reasonPhrase(_ status: Int) -> String {
    switch status {
    case 101: return "Switching Protocols"
    case 200: return "OK"
    case 201: return "Created"
    case 202: return "Accepted"
    case 204: return "No Content"
    case 301: return "Moved Permanently"
    case 304: return "Not Modified"
    case 400: return "Bad Request"
    case 401: return "Unauthorized"
    case 403: return "Forbidden"
    case 404: return "Not Found"
    case 405: return "Method Not Allowed"
    case 408: return "Request Timeout"
    case 409: return "Conflict"
    case 411: return "Length Required"
    case 413: return "Content Too Large"
    case 415: return "Unsupported Media Type"
    case 426: return "Upgrade Required"
    case 429: return "Too Many Requests"
    case 431: return "Request Header Fields Too Large"
    case 500: return "Internal Server Error"
    case 501: return "Not Implemented"
    case 503: return "Service Unavailable"
    case 505: return "HTTP Version Not Supported"
    default: return "Status \(status)"
    }
  }
}
