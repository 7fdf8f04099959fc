import CLibCurl
import COpenSSL

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// The certificates of `--tls-ca-file`, parsed once at start and added to the trust
/// store of every outbound TLS connection next to the system's roots.
///
/// Why not `CURLOPT_CAINFO_BLOB` with system bundle + file: a blob replaces the
/// bundle file and is not cached, so each new connection would parse every system
/// root again on the loop thread (figures in Benchmarks/results/outbound-http.md).
/// libcurl keeps the store it built from the system bundle (`CURLOPT_CA_CACHE_TIMEOUT`);
/// `CURLOPT_SSL_CTX_FUNCTION` adds these few certificates to it (adding one already
/// there is a no-op in OpenSSL).
final class TrustRoots {
  private let certificates: [OpaquePointer]

  init(file: String) throws {
    let pem = try Self.readFile(file)
    certificates = Self.parse(pem)
    guard !certificates.isEmpty else { throw HTTPClientError("\(file) holds no PEM certificate") }
  }

  deinit {
    for certificate in certificates { X509_free(certificate) }
  }

  /// Adds the certificates to the store of `sslContext` (an `SSL_CTX *`).
  func add(to sslContext: UnsafeMutableRawPointer) -> Bool {
    guard let store = SSL_CTX_get_cert_store(OpaquePointer(sslContext)) else { return false }
    var ok = true
    for certificate in certificates where X509_STORE_add_cert(store, certificate) != 1 { ok = false }
    ERR_clear_error()  // leave no stale error for libcurl's own reporting
    return ok
  }

  /// Every `CERTIFICATE` block of the PEM text (anything else is skipped).
  private static func parse(_ pem: [UInt8]) -> [OpaquePointer] {
    pem.withUnsafeBytes { bytes in
      guard let bio = BIO_new_mem_buf(bytes.baseAddress, Int32(bytes.count)) else { return [] }
      defer { BIO_free(bio) }
      var out: [OpaquePointer] = []
      while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) { out.append(certificate) }
      ERR_clear_error()  // the read that found no further block
      return out
    }
  }

  /// Throws (for the operator) when `path` is unreadable or holds no certificate.
  static func check(_ path: String) throws {
    _ = try TrustRoots(file: path)
  }

  /// A whole (small) file; throws with a message an operator can act on.
  static func readFile(_ path: String) throws -> [UInt8] {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw HTTPClientError("cannot read \(path): \(String(cString: strerror(errno)))") }
    defer { _ = close(fd) }
    var out: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 64 << 10)
    while true {
      let n = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
      guard n >= 0 else { throw HTTPClientError("cannot read \(path): \(String(cString: strerror(errno)))") }
      if n == 0 { return out }
      out.append(contentsOf: chunk[..<n])
      guard out.count <= 16 << 20 else { throw HTTPClientError("\(path) is larger than 16 MiB: not a CA file") }
    }
  }
}

/// `CURLOPT_SSL_CTX_FUNCTION`: runs as libcurl sets up each TLS connection, after it
/// loaded the system roots.
func addTrustRoots(_: UnsafeMutableRawPointer?, _ sslContext: UnsafeMutableRawPointer?, _ roots: UnsafeMutableRawPointer?)
  -> CURLcode
{
  guard let sslContext, let roots else { return CURLE_SSL_CERTPROBLEM }
  let added = Unmanaged<TrustRoots>.fromOpaque(roots).takeUnretainedValue().add(to: sslContext)
  return added ? CURLE_OK : CURLE_SSL_CERTPROBLEM
}
