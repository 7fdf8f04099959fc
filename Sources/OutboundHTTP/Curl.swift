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
}
