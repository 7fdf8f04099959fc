import CLibCurl
import RelayPrimitives

/// One request inside libcurl: its easy handle (lent by the client, handed back by
/// `detach()`), header list and error buffer, and the response as it arrives.
/// libcurl's write and header callbacks reach it through an unretained pointer: the
/// client's `transfers` table holds it for as long as the easy handle is in the multi
/// handle.
final class Transfer {
  let easy: UnsafeMutableRawPointer
  let bodyBytes: Int
  private let maxResponseBytes: Int
  /// `HTTPRequest.responseHeaders` (lower case); nil keeps every header.
  private let wantedHeaders: [String]?
  private var completion: ((HTTPResult) -> Void)?
  private var headerList: UnsafeMutablePointer<curl_slist>?
  private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
  private var released = false
  private(set) var headers: [(String, String)] = []
  private(set) var body: [UInt8] = []
  /// The write callback refused bytes past `maxResponseBytes`.
  private var overflowed = false
  private let tally: TransferTally

  /// `easy` is fresh or was `curl_easy_reset` (no option of an earlier request left).
  init(
    easy: UnsafeMutableRawPointer, request: HTTPRequest, maxResponseBytes: Int, tally: TransferTally,
    completion: @escaping (HTTPResult) -> Void
  ) {
    self.easy = easy
    bodyBytes = request.body.count
    if case .only(let names) = request.responseHeaders {
      wantedHeaders = names
    } else {
      wantedHeaders = nil
    }
    self.maxResponseBytes = maxResponseBytes
    self.completion = completion
    self.tally = tally
    tally.live += 1
    errorBuffer[0] = 0
  }

  deinit {
    release()
    errorBuffer.deallocate()
    tally.live -= 1
  }

  /// Sets every option of the request on the easy handle.
  func configure(_ request: HTTPRequest, settings: HTTPClientSettings, trust: TrustRoots?) throws {
    // libcurl takes C strings: a NUL would cut the URL short instead of failing.
    guard !request.url.utf8.contains(0) else { throw HTTPFailure(kind: .other, message: "NUL in the URL") }
    // The method goes on the request line as it is (RFC 9110 §9.1: a token).
    guard !request.method.isEmpty, request.method.utf8.allSatisfy({ (0x41...0x5A).contains($0) || $0 == 0x2D }) else {
      throw HTTPFailure(kind: .other, message: "method \(request.method) is not an upper-case token")
    }
    let me = Unmanaged.passUnretained(self).toOpaque()
    var ok = relay_curl_easy_ptr(easy, CURLOPT_ERRORBUFFER, errorBuffer) == CURLE_OK
    func set(_ option: CURLoption, _ value: Int) { ok = ok && relay_curl_easy_long(easy, option, value) == CURLE_OK }
    func set(_ option: CURLoption, _ value: String) {
      ok = ok && value.withCString { relay_curl_easy_ptr(easy, option, $0) } == CURLE_OK  // libcurl copies strings
    }
    set(CURLOPT_URL, request.url)
    set(CURLOPT_PROTOCOLS_STR, "http,https")
    // No proxy, not even one named by http_proxy/https_proxy: outbound targets are
    // the operator's own flags, and a variable inherited by a container must not
    // silently route signed webhooks and provider credentials elsewhere.
    set(CURLOPT_PROXY, "")
    set(CURLOPT_FOLLOWLOCATION, 0)  // a redirect is an answer; the caller sees its status
    set(CURLOPT_NOSIGNAL, 1)  // no SIGALRM: the loop thread must not be interrupted
    set(CURLOPT_TIMEOUT_MS, max(1, request.timeoutMs))
    set(CURLOPT_CONNECTTIMEOUT_MS, max(1, min(settings.connectTimeoutMs, request.timeoutMs)))
    // Names are resolved for every new connection (contract §11), not cached.
    set(CURLOPT_DNS_CACHE_TIMEOUT, 0)
    set(CURLOPT_TCP_KEEPALIVE, 1)
    set(CURLOPT_MAXFILESIZE_LARGE, maxResponseBytes)
    // The system roots from the bundle file only, not also the hashed directory
    // (Debian's build sets both; they hold the same certificates): libcurl caches
    // the store built from a bundle file alone (CURLOPT_CA_CACHE_TIMEOUT), and
    // otherwise parses every root again for each new connection, on the loop thread.
    ok = ok && relay_curl_easy_ptr(easy, CURLOPT_CAPATH, nil) == CURLE_OK
    if request.preferHTTP2 {
      set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_2TLS))
      set(CURLOPT_PIPEWAIT, 1)
    } else {
      set(CURLOPT_HTTP_VERSION, Int(CURL_HTTP_VERSION_1_1))
    }
    setMethod(request, &ok)
    headerList = Self.headerList(request.headers)
    ok = ok && relay_curl_easy_ptr(easy, CURLOPT_HTTPHEADER, headerList) == CURLE_OK
    ok = ok && relay_curl_easy_data_cb(easy, CURLOPT_WRITEFUNCTION, writeCallback) == CURLE_OK
    ok = ok && relay_curl_easy_ptr(easy, CURLOPT_WRITEDATA, me) == CURLE_OK
    ok = ok && relay_curl_easy_data_cb(easy, CURLOPT_HEADERFUNCTION, headerCallback) == CURLE_OK
    ok = ok && relay_curl_easy_ptr(easy, CURLOPT_HEADERDATA, me) == CURLE_OK
    if let trust {
      ok = ok && relay_curl_easy_ssl_ctx_cb(easy, addTrustRoots) == CURLE_OK
      ok = ok && relay_curl_easy_ptr(easy, CURLOPT_SSL_CTX_DATA, Unmanaged.passUnretained(trust).toOpaque()) == CURLE_OK
    }
    guard ok else { throw HTTPFailure(kind: .other, message: "request not accepted by libcurl: \(lastError)") }
  }

  private func setMethod(_ request: HTTPRequest, _ ok: inout Bool) {
    let method = request.method
    if method == "GET", request.body.isEmpty {
      ok = ok && relay_curl_easy_long(easy, CURLOPT_HTTPGET, 1) == CURLE_OK
      return
    }
    if method != "POST" {
      ok = ok && method.withCString { relay_curl_easy_ptr(easy, CURLOPT_CUSTOMREQUEST, $0) } == CURLE_OK
    }
    guard method == "POST" || !request.body.isEmpty else { return }
    ok = ok && relay_curl_easy_off(easy, CURLOPT_POSTFIELDSIZE_LARGE, curl_off_t(request.body.count)) == CURLE_OK
    // COPYPOSTFIELDS: libcurl keeps its own copy, so the request's array may go.
    ok = ok && request.body.withUnsafeBytes { relay_curl_easy_ptr(easy, CURLOPT_COPYPOSTFIELDS, $0.baseAddress ?? UnsafeRawPointer(bitPattern: 1)) } == CURLE_OK
  }

  /// The caller's headers, plus an empty `Expect:` so a larger HTTP/1.1 POST does not
  /// wait for `100 Continue` (RFC 9110 §10.1.1 lets a client omit it).
  private static func headerList(_ headers: [(String, String)]) -> UnsafeMutablePointer<curl_slist>? {
    var list: UnsafeMutablePointer<curl_slist>?
    var hasExpect = false
    for (name, value) in headers {
      // libcurl sends each entry as one C string on one line: a CR or LF would split
      // it, a NUL cut it short.
      let breaks: (UInt8) -> Bool = { $0 == 0x0D || $0 == 0x0A || $0 == 0 }
      guard !name.isEmpty, !name.utf8.contains(where: breaks), !value.utf8.contains(where: breaks) else { continue }
      if name.utf8.count == 6, name.lowercased() == "expect" { hasExpect = true }
      list = curl_slist_append(list, "\(name): \(value)")
    }
    if !hasExpect { list = curl_slist_append(list, "Expect:") }
    return list
  }

  /// Frees the header list and hands the easy handle back (once; nil after) for the
  /// client to reuse or free. The handle must be out of the multi handle.
  func detach() -> UnsafeMutableRawPointer? {
    guard !released else { return nil }
    released = true
    curl_slist_free_all(headerList)
    headerList = nil
    return easy
  }

  /// Frees the easy handle and the header list. Idempotent; the handle must be out of
  /// the multi handle.
  func release() {
    if let easy = detach() { curl_easy_cleanup(easy) }
  }

  /// Runs the completion once.
  func complete(_ result: HTTPResult) {
    guard let done = completion else { return }
    completion = nil
    done(result)
  }

  /// The result of a transfer that ended with `code`.
  func result(_ code: CURLcode) -> HTTPResult {
    if code == CURLE_OK {
      var status = 0
      _ = relay_curl_info_long(easy, CURLINFO_RESPONSE_CODE, &status)
      return .response(status: status, headers: headers, body: body)
    }
    return .failure(HTTPFailure(kind: overflowed ? .tooLarge : Curl.kind(of: code, easy: easy), message: lastError(code)))
  }

  private var lastError: String { String(cString: errorBuffer) }

  private func lastError(_ code: CURLcode) -> String {
    let detail = lastError
    return detail.isEmpty ? String(cString: curl_easy_strerror(code)) : detail
  }

  // MARK: Callbacks

  fileprivate func received(_ bytes: UnsafeRawBufferPointer) -> Int {
    guard body.count + bytes.count <= maxResponseBytes else {
      overflowed = true
      return 0  // libcurl ends the transfer with CURLE_WRITE_ERROR
    }
    body.append(contentsOf: bytes)
    return bytes.count
  }

  /// One header line (libcurl passes them one at a time, CRLF included). A status
  /// line starts a new header block (an interim 1xx answer came first).
  fileprivate func headerLine(_ bytes: UnsafeRawBufferPointer) {
    if let wantedHeaders, !bytes.starts(with: "HTTP/".utf8),
      !wantedHeaders.contains(where: { Self.isHeader(bytes, named: $0) })
    {
      return
    }
    var line = Substring(String(decoding: bytes, as: UTF8.self))
    while let last = line.last, last.isNewline { line = line.dropLast() }  // "\r\n" is one Character
    if line.hasPrefix("HTTP/") {
      headers.removeAll()
      return
    }
    guard let colon = line.firstIndex(of: ":") else { return }
    headers.append((line[..<colon].trimmingSpaces(), line[line.index(after: colon)...].trimmingSpaces()))
  }

  /// Whether the header line starts with `name` (lower case) and a colon: field names
  /// are case-insensitive (RFC 9110 §5.1) and carry no space before the colon (§5.1,
  /// RFC 9112 §5.1).
  private static func isHeader(_ line: UnsafeRawBufferPointer, named name: String) -> Bool {
    let length = name.utf8.count
    guard line.count > length, line[length] == UInt8(ascii: ":") else { return false }
    for (i, byte) in name.utf8.enumerated() where byte != (line[i] | (line[i] &- 0x41 < 26 ? 0x20 : 0)) { return false }
    return true
  }
}

@available(*, unavailable)
extension Transfer: Sendable {}

/// Transfers of one client not yet freed: the tests' leak check.
final class TransferTally {
  var live = 0
}

private func writeCallback(
  _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ owner: UnsafeMutableRawPointer?
) -> Int {
  guard let owner else { return 0 }
  let transfer = Unmanaged<Transfer>.fromOpaque(owner).takeUnretainedValue()
  return transfer.received(UnsafeRawBufferPointer(start: data, count: size * count))
}

private func headerCallback(
  _ data: UnsafeMutablePointer<CChar>?, _ size: Int, _ count: Int, _ owner: UnsafeMutableRawPointer?
) -> Int {
  guard let owner else { return 0 }
  Unmanaged<Transfer>.fromOpaque(owner).takeUnretainedValue().headerLine(
    UnsafeRawBufferPointer(start: data, count: size * count))
  return size * count
}
