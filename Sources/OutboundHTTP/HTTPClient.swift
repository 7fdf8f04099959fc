import CLibCurl
public import EventLoop

/// Outbound HTTP/1.1 and HTTP/2 on libcurl's multi socket interface, driven by the
/// relay's own libuv loop: libcurl says which sockets to watch (`Poll`) and when to
/// call it back (one `Timer`); it resolves names on its own threads (the threaded
/// resolver), so nothing here blocks the loop. One multi handle: connections are
/// cached and reused, HTTP/2 streams multiplexed (RFC 7540 §5).
///
/// Single-threaded like `Loop`: call everything on the loop thread. Completions run
/// on the loop thread, exactly once per accepted request, never inside `send`.
/// Call `close()` before dropping the client.
public final class HTTPClient {
  private let loop: Loop
  public let settings: HTTPClientSettings
  private var multi: UnsafeMutableRawPointer?
  /// Requests in libcurl, by easy handle.
  private var transfers: [UnsafeMutableRawPointer: Transfer] = [:]
  /// Requests that failed before reaching libcurl, completed on the next turn.
  private var failedEarly: [(Transfer, HTTPFailure)] = []
  /// Easy handles of finished requests, `curl_easy_reset` and ready for the next one:
  /// a handle and its buffers cost several allocations to make and to free, per request.
  private var spareHandles: [UnsafeMutableRawPointer] = []
  /// Socket watchers libcurl asked for, by descriptor.
  private var polls: [Int32: Poll] = [:]
  private let timer: EventLoop.Timer
  private let deferTimer: EventLoop.Timer
  /// `caFile`'s certificates; libcurl's callback reaches them unretained while the
  /// client lives.
  private let trust: TrustRoots?
  public private(set) var inFlightBytes = 0
  private var closed = false
  /// Transfer objects alive (the leak check of the tests).
  let tally = TransferTally()

  public init(loop: Loop, settings: HTTPClientSettings) throws {
    try Curl.globalInit()
    self.loop = loop
    self.settings = settings
    trust = try settings.caFile.map { try TrustRoots(file: $0) }
    guard let m = curl_multi_init() else { throw HTTPClientError("curl_multi_init failed") }
    multi = m
    timer = EventLoop.Timer(loop: loop)
    deferTimer = EventLoop.Timer(loop: loop)
    let me = Unmanaged.passUnretained(self).toOpaque()
    _ = relay_curl_multi_socket_cb(m, socketCallback)
    _ = relay_curl_multi_ptr(m, CURLMOPT_SOCKETDATA, me)
    _ = relay_curl_multi_timer_cb(m, timerCallback)
    _ = relay_curl_multi_ptr(m, CURLMOPT_TIMERDATA, me)
    _ = relay_curl_multi_long(m, CURLMOPT_PIPELINING, Int(CURLPIPE_MULTIPLEX))
    _ = relay_curl_multi_long(m, CURLMOPT_MAX_HOST_CONNECTIONS, max(1, settings.maxConnectionsPerHost))
    _ = relay_curl_multi_long(m, CURLMOPT_MAX_CONCURRENT_STREAMS, max(1, settings.maxStreamsPerConnection))
  }

  deinit {
    // A client dropped without close(): free libcurl's and libuv's resources without
    // calling completions (their owners are going away too).
    if !closed { teardown() }
  }

  /// Spare easy handles kept at most: enough for the requests one turn of completions
  /// starts again, without holding a handle per past request.
  static let maxSpareHandles = 256

  /// Spare easy handles held (tests).
  var spareHandleCount: Int { spareHandles.count }

  /// Requests started and not yet completed.
  public var inFlight: Int { transfers.count + failedEarly.count }

  /// Starts the request; false (completion never called) when closed or the
  /// in-flight bound (count or bytes) is reached.
  @discardableResult
  public func send(_ request: HTTPRequest, completion: @escaping (HTTPResult) -> Void) -> Bool {
    guard !closed, let multi, inFlight < settings.maxInFlight,
      request.body.count <= settings.maxInFlightBytes - inFlightBytes
    else { return false }
    // curl_easy_init fails only without memory, and then nothing else would work either.
    guard let easy = spareHandles.popLast() ?? curl_easy_init() else { preconditionFailure("curl_easy_init failed") }
    let transfer = Transfer(
      easy: easy, request: request, maxResponseBytes: settings.maxResponseBytes, tally: tally, completion: completion)
    inFlightBytes += transfer.bodyBytes
    do {
      try transfer.configure(request, settings: settings, trust: trust)
    } catch {
      failLater(transfer, error)
      return true
    }
    guard curl_multi_add_handle(multi, transfer.easy) == CURLM_OK else {
      failLater(transfer, HTTPFailure(kind: .other, message: "curl_multi_add_handle failed"))
      return true
    }
    transfers[transfer.easy] = transfer
    return true
  }

  /// Cancels everything in flight (completions get `.failure(.cancelled)`) and frees
  /// every handle. Idempotent.
  public func close() {
    guard !closed else { return }
    let ended = Array(transfers.values) + failedEarly.map(\.0)
    teardown()
    let cancelled = HTTPFailure(kind: .cancelled, message: "client closed")
    for transfer in ended { transfer.complete(.failure(cancelled)) }
  }

  private func teardown() {
    closed = true
    if let multi {
      // libcurl calls no socket or timer callback once these are gone; the watchers
      // are closed below, before libcurl closes their sockets in the cleanup.
      _ = relay_curl_multi_socket_cb(multi, nil)
      _ = relay_curl_multi_timer_cb(multi, nil)
      for (easy, _) in transfers { curl_multi_remove_handle(multi, easy) }
    }
    for (_, poll) in polls { poll.close() }
    polls.removeAll()
    if let multi { curl_multi_cleanup(multi) }
    multi = nil
    for (_, transfer) in transfers { transfer.release() }
    transfers.removeAll()
    for (transfer, _) in failedEarly { transfer.release() }
    failedEarly.removeAll()
    for easy in spareHandles { curl_easy_cleanup(easy) }
    spareHandles.removeAll()
    inFlightBytes = 0
    timer.close()
    deferTimer.close()
  }

  /// `nil` when `url` can be used (`http://` or `https://` with a host), else why not:
  /// checked at start so a setting that cannot work stops the relay (exit 64).
  public static func checkURL(_ url: String) -> String? {
    Curl.checkURL(url)
  }

  /// Throws (with a message for the operator) when `path` cannot serve as
  /// `HTTPClientSettings.caFile`: unreadable, or no PEM certificate in it.
  public static func checkTrustFile(_ path: String) throws {
    try TrustRoots.check(path)
  }

  // MARK: libcurl's callbacks

  /// `CURLMOPT_SOCKETFUNCTION`: watch `fd` for what libcurl wants, or stop.
  fileprivate func socketChanged(_ fd: Int32, _ what: Int32) {
    if what == CURL_POLL_REMOVE {
      polls.removeValue(forKey: fd)?.close()
      return
    }
    let poll: Poll
    if let existing = polls[fd] {
      poll = existing
    } else {
      poll = Poll(loop: loop, socket: fd)
      polls[fd] = poll
    }
    var events: Poll.Events = []
    if what & CURL_POLL_IN != 0 { events.insert(.readable) }
    if what & CURL_POLL_OUT != 0 { events.insert(.writable) }
    poll.start(events) { [unowned self] status, seen in
      var flags: Int32 = 0
      if status < 0 { flags |= CURL_CSELECT_ERR }
      if seen.contains(.readable) { flags |= CURL_CSELECT_IN }
      if seen.contains(.writable) { flags |= CURL_CSELECT_OUT }
      self.socketAction(fd, flags)
    }
  }

  /// `CURLMOPT_TIMERFUNCTION`: one timer; libcurl may not be called from inside its
  /// own callback, so even a 0 ms timeout goes through the loop.
  fileprivate func timerChanged(_ timeoutMs: Int) {
    guard timeoutMs >= 0 else { return timer.stop() }
    timer.start(afterMs: UInt64(timeoutMs)) { [unowned self] in
      self.socketAction(CURL_SOCKET_TIMEOUT, 0)
    }
  }

  private func socketAction(_ fd: Int32, _ flags: Int32) {
    guard let multi else { return }
    var running: Int32 = 0
    _ = curl_multi_socket_action(multi, fd, flags, &running)
    finishDone()
  }

  /// Completes every transfer libcurl reports done.
  private func finishDone() {
    var left: Int32 = 0
    while let multi, let message = curl_multi_info_read(multi, &left) {
      guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle else { continue }
      let code = relay_curl_msg_result(message)
      guard let transfer = transfers.removeValue(forKey: easy) else { continue }
      curl_multi_remove_handle(multi, easy)
      inFlightBytes -= transfer.bodyBytes
      let result = transfer.result(code)
      recycle(transfer)
      transfer.complete(result)
    }
  }

  /// Keeps the easy handle of a transfer out of the multi handle for the next request,
  /// or frees it when enough are kept.
  private func recycle(_ transfer: Transfer) {
    guard let easy = transfer.detach() else { return }
    guard !closed, spareHandles.count < Self.maxSpareHandles else { return curl_easy_cleanup(easy) }
    // Every option back to its default (the next request sets its own); libcurl keeps
    // the connection cache in the multi handle, not in the easy handle.
    curl_easy_reset(easy)
    spareHandles.append(easy)
  }

  private func failLater(_ transfer: Transfer, _ error: any Error) {
    let failure = error as? HTTPFailure ?? HTTPFailure(kind: .other, message: "\(error)")
    failedEarly.append((transfer, failure))
    deferTimer.start(afterMs: 0) { [unowned self] in
      let failed = self.failedEarly
      self.failedEarly.removeAll()
      for (transfer, failure) in failed {
        self.inFlightBytes -= transfer.bodyBytes
        self.recycle(transfer)
        transfer.complete(.failure(failure))
      }
    }
  }
}

@available(*, unavailable)
extension HTTPClient: Sendable {}

private func socketCallback(
  _: UnsafeMutableRawPointer?, _ fd: curl_socket_t, _ what: Int32, _ client: UnsafeMutableRawPointer?,
  _: UnsafeMutableRawPointer?
) -> Int32 {
  guard let client else { return -1 }
  Unmanaged<HTTPClient>.fromOpaque(client).takeUnretainedValue().socketChanged(fd, what)
  return 0
}

private func timerCallback(_: UnsafeMutableRawPointer?, _ timeoutMs: Int, _ client: UnsafeMutableRawPointer?) -> Int32 {
  guard let client else { return -1 }
  Unmanaged<HTTPClient>.fromOpaque(client).takeUnretainedValue().timerChanged(timeoutMs)
  return 0
}
