import CLibUV

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// Parses an IPv4 or IPv6 literal (`"127.0.0.1"`, `"::1"`, `"0.0.0.0"`) into a
/// `sockaddr_storage`. Host names are not resolved here: the relay binds and connects
/// to literals, looked up beforehand by `HostResolver`.
func makeSocketAddress(host: String, port: Int) throws(LoopError) -> sockaddr_storage {
  guard let port = Int32(exactly: port), (0...65_535).contains(port) else { throw .invalidArgument }
  var storage = sockaddr_storage()
  let result = withUnsafeMutableBytes(of: &storage) { raw -> Int32 in
    if host.contains(":") {
      return uv_ip6_addr(host, port, raw.baseAddress!.assumingMemoryBound(to: sockaddr_in6.self))
    }
    return uv_ip4_addr(host, port, raw.baseAddress!.assumingMemoryBound(to: sockaddr_in.self))
  }
  guard result == 0 else { throw LoopError(code: result) }
  return storage
}

/// Host and port of a socket address, or nil for a family other than IPv4/IPv6.
func describeSocketAddress(_ storage: sockaddr_storage) -> (host: String, port: Int)? {
  let family = Int32(storage.ss_family)
  var storage = storage
  return withUnsafeBytes(of: &storage) { raw -> (String, Int)? in
    var name = [CChar](repeating: 0, count: 64)
    switch family {
    case AF_INET:
      let address = raw.load(as: sockaddr_in.self)
      var copy = address
      guard uv_ip4_name(&copy, &name, name.count) == 0 else { return nil }
      return (string(fromNulTerminated: name), Int(UInt16(bigEndian: address.sin_port)))
    case AF_INET6:
      let address = raw.load(as: sockaddr_in6.self)
      var copy = address
      guard uv_ip6_name(&copy, &name, name.count) == 0 else { return nil }
      return (string(fromNulTerminated: name), Int(UInt16(bigEndian: address.sin6_port)))
    default:
      return nil
    }
  }
}

/// `uv_tcp_getsockname` / `uv_tcp_getpeername` into a `sockaddr_storage`.
func socketAddress(
  of tcp: UnsafeMutablePointer<uv_tcp_t>, peer: Bool
) -> sockaddr_storage? {
  var storage = sockaddr_storage()
  var length = Int32(MemoryLayout<sockaddr_storage>.size)
  let result = withUnsafeMutableBytes(of: &storage) { raw -> Int32 in
    let address = raw.baseAddress!.assumingMemoryBound(to: sockaddr.self)
    return peer ? uv_tcp_getpeername(tcp, address, &length) : uv_tcp_getsockname(tcp, address, &length)
  }
  return result == 0 ? storage : nil
}

/// The peer of `tcp` as `"host:port"`, with IPv6 hosts bracketed.
func peerAddress(_ tcp: UnsafeMutablePointer<uv_tcp_t>) -> String? {
  guard let storage = socketAddress(of: tcp, peer: true),
    let (host, port) = describeSocketAddress(storage)
  else { return nil }
  return host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
}

/// Runs `body` with `storage` viewed as a `sockaddr` pointer (for bind and connect).
func withSocketAddressPointer<Result>(
  _ storage: sockaddr_storage, _ body: (UnsafePointer<sockaddr>) -> Result
) -> Result {
  var storage = storage
  return withUnsafeBytes(of: &storage) { raw in
    body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self))
  }
}

/// Decodes a NUL-terminated C string held in an array.
private func string(fromNulTerminated characters: [CChar]) -> String {
  String(decoding: characters.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
}

/// Host names to the IP literals `TCPConnector` takes.
public enum HostResolver {
  /// `host` as an address literal: literals unchanged, names through one blocking
  /// `getaddrinfo` (its first IPv4 answer, else its first answer: `localhost` often
  /// lists ::1 first, and most servers bind IPv4). Callers use it where blocking is
  /// harmless: at start, or on a client's own thread; on a loop thread, use
  /// `resolve(_:on:_:)`, which does not block.
  public static func address(of host: String) -> String? {
    if host.contains(":") || host.allSatisfy({ $0.isNumber || $0 == "." }) { return host }
    var hints = addrinfo()
    hints.ai_family = AF_UNSPEC
    hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
    var list: UnsafeMutablePointer<addrinfo>?
    guard getaddrinfo(host, nil, &hints, &list) == 0, let first = list else { return nil }
    defer { freeaddrinfo(list) }
    return preferredLiteral(in: first)
  }
}
