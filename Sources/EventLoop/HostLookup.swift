import CLibUV

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

extension HostResolver {
  /// Resolves `host` to the address literal `TCPConnector` takes, without blocking
  /// the loop: `uv_getaddrinfo` runs `getaddrinfo` on libuv's thread pool and calls
  /// back on the loop thread (`docs/src/dns.rst`). The answer is chosen as by
  /// `address(of:)`: the first IPv4 answer, else the first answer.
  ///
  /// An IP literal needs no lookup and is answered before this returns, as is a
  /// request libuv refuses at once; a name is answered from a later loop callback.
  /// A failure carries libuv's code (`UV_EAI_NONAME` for an unknown name). The
  /// pending request keeps the loop running until it completes; `completion` is
  /// called exactly once.
  public static func resolve(
    _ host: String, on loop: Loop, _ completion: @escaping (Result<String, LoopError>) -> Void
  ) {
    if isLiteral(host) { return completion(.success(host)) }
    HostLookup.start(host, on: loop, completion)
  }

  /// Whether `host` is an IPv4 or IPv6 literal (`uv_inet_pton` accepts it).
  static func isLiteral(_ host: String) -> Bool {
    var scratch = sockaddr_in6()  // room for an in6_addr, the larger of the two
    return withUnsafeMutableBytes(of: &scratch) { raw in
      uv_inet_pton(AF_INET, host, raw.baseAddress) == 0 || uv_inet_pton(AF_INET6, host, raw.baseAddress) == 0
    }
  }

  /// The preferred entry of a `getaddrinfo` list as a literal: the first IPv4 answer
  /// (`localhost` often lists ::1 first, and most servers bind IPv4), else the first.
  static func preferredLiteral(in list: UnsafeMutablePointer<addrinfo>) -> String? {
    var first = list
    var entry: UnsafeMutablePointer<addrinfo>? = list
    while let e = entry, e.pointee.ai_family != AF_INET { entry = e.pointee.ai_next }
    if let e = entry { first = e }
    guard let address = first.pointee.ai_addr.map(UnsafeRawPointer.init) else { return nil }
    var text = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
    let converted: UnsafePointer<CChar>?
    if first.pointee.ai_family == AF_INET6 {
      var raw = address.loadUnaligned(as: sockaddr_in6.self).sin6_addr
      converted = inet_ntop(AF_INET6, &raw, &text, socklen_t(text.count))
    } else if first.pointee.ai_family == AF_INET {
      var raw = address.loadUnaligned(as: sockaddr_in.self).sin_addr
      converted = inet_ntop(AF_INET, &raw, &text, socklen_t(text.count))
    } else {
      return nil
    }
    guard converted != nil else { return nil }
    return String(decoding: text.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
  }
}

/// One `uv_getaddrinfo` request in flight. libuv's rules (`docs/src/dns.rst`,
/// `request.rst`): the request must stay at a fixed address until its callback, so it
/// is heap-allocated and freed there; the result list is ours to free with
/// `uv_freeaddrinfo`. The object holds the completion and is kept alive by one
/// Unmanaged +1 stored in `req.data`, released exactly once, in the callback.
private final class HostLookup {
  private let completion: (Result<String, LoopError>) -> Void

  private init(_ completion: @escaping (Result<String, LoopError>) -> Void) {
    self.completion = completion
  }

  static func start(_ host: String, on loop: Loop, _ completion: @escaping (Result<String, LoopError>) -> Void) {
    let request = UnsafeMutablePointer<uv_getaddrinfo_t>.allocate(capacity: 1)
    let lookup = Unmanaged.passRetained(HostLookup(completion))
    request.pointee.data = lookup.toOpaque()
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    let result = uv_getaddrinfo(loop.rawLoop, request, hostLookupCallback, host, nil, &hints)
    guard result == 0 else {
      // Refused before anything was queued: no callback will come.
      lookup.release()
      request.deallocate()
      return completion(.failure(LoopError(code: result)))
    }
  }

  /// Delivers the answer; called once, from `hostLookupCallback`.
  fileprivate func finish(status: Int32, literal: String?) {
    if status != 0 { return completion(.failure(LoopError(code: status))) }
    guard let literal else { return completion(.failure(LoopError(code: UV_EAI_NODATA.rawValue))) }
    completion(.success(literal))
  }
}

/// `uv_getaddrinfo_cb`, on the loop thread: capture-free, so it recovers the lookup
/// from `req.data`. `status` is 0 or a `UV_EAI_*` code (`UV_EAI_CANCELED` if the
/// request was cancelled); `list` is nil on failure.
private func hostLookupCallback(
  _ request: UnsafeMutablePointer<uv_getaddrinfo_t>?, _ status: Int32, _ list: UnsafeMutablePointer<addrinfo>?
) {
  guard let request else { preconditionFailure("uv_getaddrinfo callback without its request") }
  let lookup = Unmanaged<HostLookup>.fromOpaque(request.pointee.data).takeRetainedValue()
  request.deallocate()
  let literal = list.flatMap { HostResolver.preferredLiteral(in: $0) }
  uv_freeaddrinfo(list)
  lookup.finish(status: status, literal: literal)
}
