import CLibCurl

#if canImport(Glibc)
  import Glibc
#elseif canImport(Darwin)
  import Darwin
#endif

/// libcurl's process-wide parts: the one `curl_global_init`, URL checks, and how its
/// error codes map to `HTTPFailure.Kind`.
enum Curl {
  /// `curl_global_init` must run once before any other call (libcurl-tutorial
  /// "Global Preparation"); a Swift static is initialised exactly once, thread-safely.
  private static let initialised: Bool = curl_global_init(Int(CURL_GLOBAL_DEFAULT)) == CURLE_OK

  static func globalInit() throws {
    guard initialised else { throw HTTPClientError("curl_global_init failed") }
  }

  /// nil when `url` parses as an `http://` or `https://` URL with a host; else why not.
  static func checkURL(_ url: String) -> String? {
    guard (try? globalInit()) != nil, let handle = curl_url() else { return "libcurl cannot parse URLs" }
    defer { curl_url_cleanup(handle) }
    guard curl_url_set(handle, CURLUPART_URL, url, 0) == CURLUE_OK else {
      return "not a URL: want http://HOST[:PORT]/PATH or https://HOST[:PORT]/PATH"
    }
    let scheme = part(handle, CURLUPART_SCHEME)?.lowercased()
    guard scheme == "http" || scheme == "https" else { return "the scheme must be http:// or https://" }
    guard let host = part(handle, CURLUPART_HOST), !host.isEmpty else { return "the URL has no host" }
    return nil
  }

  private static func part(_ handle: OpaquePointer, _ which: CURLUPart) -> String? {
    var value: UnsafeMutablePointer<CChar>?
    guard curl_url_get(handle, which, &value, 0) == CURLUE_OK, let value else { return nil }
    defer { curl_free(value) }
    return String(cString: value)
  }

  /// The failure kind of a transfer that ended with `code`.
  static func kind(of code: CURLcode, easy: UnsafeMutableRawPointer) -> HTTPFailure.Kind {
    switch code {
    case CURLE_OPERATION_TIMEDOUT: return .timeout
    case CURLE_COULDNT_RESOLVE_HOST: return .resolve
    case CURLE_COULDNT_CONNECT:
      var osError = 0
      _ = relay_curl_info_long(easy, CURLINFO_OS_ERRNO, &osError)
      return osError == Int(ECONNREFUSED) ? .refused : .connect
    case CURLE_SSL_CONNECT_ERROR, CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CERTPROBLEM, CURLE_SSL_CIPHER,
      CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR, CURLE_SSL_PINNEDPUBKEYNOTMATCH, CURLE_SSL_INVALIDCERTSTATUS:
      return .tls
    case CURLE_FILESIZE_EXCEEDED: return .tooLarge
    default: return .other
    }
  }

  /// The CA bundle this libcurl was built to trust (`CURLINFO_CAINFO`), if any.
  static func defaultCABundle() -> String? {
    guard let easy = curl_easy_init() else { return nil }
    defer { curl_easy_cleanup(easy) }
    var path: UnsafeMutablePointer<CChar>?
    guard relay_curl_info_string(easy, CURLINFO_CAINFO, &path) == CURLE_OK, let path else { return nil }
    return String(cString: path)
  }
}

/// The trust roots when `--tls-ca-file` adds some: the system bundle and the extra
/// file as one PEM blob in memory (`CURLOPT_CAINFO_BLOB`), read once at start. The
/// blob is handed to libcurl without a copy, so it lives as long as the client.
final class TrustBundle {
  let blob: UnsafeMutablePointer<curl_blob>
  private let bytes: UnsafeMutableRawBufferPointer

  init(extraFile: String) throws {
    let extra = try Self.extraRoots(extraFile)
    // A missing system bundle leaves the extra roots alone: still usable.
    let system = Curl.defaultCABundle().flatMap { try? Self.readFile($0) } ?? []
    let pem = system + [UInt8(ascii: "\n")] + extra
    bytes = .allocate(byteCount: pem.count, alignment: 1)
    bytes.copyMemory(from: UnsafeRawBufferPointer(start: pem, count: pem.count))
    blob = .allocate(capacity: 1)
    blob.initialize(to: curl_blob(data: bytes.baseAddress, len: pem.count, flags: UInt32(CURL_BLOB_NOCOPY)))
  }

  deinit {
    blob.deallocate()
    bytes.deallocate()
  }

  /// The PEM text of an extra trust file; throws when it is unreadable or holds no
  /// certificate.
  static func extraRoots(_ path: String) throws -> [UInt8] {
    let pem = try readFile(path)
    guard pem.contains(subsequence: Array("-----BEGIN CERTIFICATE-----".utf8)) else {
      throw HTTPClientError("\(path) holds no PEM certificate")
    }
    return pem
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

extension Array where Element == UInt8 {
  fileprivate func contains(subsequence needle: [UInt8]) -> Bool {
    guard !needle.isEmpty, count >= needle.count else { return needle.isEmpty }
    for start in 0...(count - needle.count) where self[start] == needle[0] {
      if self[start..<(start + needle.count)].elementsEqual(needle) { return true }
    }
    return false
  }
}
