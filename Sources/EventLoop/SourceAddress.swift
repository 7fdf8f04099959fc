import CLibUV

#if canImport(Glibc)
  import Glibc
#endif

// Linux picks a connecting socket's local port while scanning the ephemeral range, and it
// tries one parity of ports first: once about 14 000 connections share one source
// address and destination, every further connect() walks the whole exhausted half
// before finding a port, and a load-test ramp crawls (Benchmarks/results/ramp.md).
// Spreading load-test clients over several loopback source addresses (all of 127/8
// is loopback) keeps that scan short.

/// `IP_BIND_ADDRESS_NO_PORT` (linux/in.h): bind the address now, choose the port at
/// connect time from the full 4-tuple instead of reserving one at bind time.
private let ipBindAddressNoPort: Int32 = 24

/// Opens the handle's socket bound to source `host` (an IP literal, any port) so the
/// following `uv_tcp_connect` leaves from it.
func bindSource(_ tcp: UnsafeMutablePointer<uv_tcp_t>, host: String) throws(LoopError) {
  let address = try makeSocketAddress(host: host, port: 0)
  let family = Int32(address.ss_family)
  #if os(Linux)
    let fd = socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
  #else
    let fd = socket(family, SOCK_STREAM, 0)
  #endif
  guard fd >= 0 else { throw LoopError(code: -errno) }
  var one: Int32 = 1
  if family == AF_INET {
    _ = setsockopt(fd, Int32(IPPROTO_IP), ipBindAddressNoPort, &one, socklen_t(MemoryLayout<Int32>.size))
  }
  let bound = withSocketAddressPointer(address) { pointer in
    bind(fd, pointer, socklen_t(family == AF_INET6 ? MemoryLayout<sockaddr_in6>.size : MemoryLayout<sockaddr_in>.size))
  }
  guard bound == 0 else {
    let error = errno
    close(fd)
    throw LoopError(code: -error)
  }
  let opened = uv_tcp_open(tcp, uv_os_sock_t(fd))
  guard opened == 0 else {
    close(fd)
    throw LoopError(code: opened)
  }
}
