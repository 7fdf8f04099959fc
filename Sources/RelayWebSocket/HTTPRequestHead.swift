// The parsed request head of an HTTP/1.x request (RFC 7230 §3).
import RelayPrimitives

/// Request line and header fields of one HTTP/1.x request.
public struct HTTPRequestHead: Sendable {
  /// The method token, case-sensitive as sent (RFC 7230 §3.1.1).
  public var method: String
  /// The request-target as sent: path and query for origin-form.
  public var target: String
  /// The path of the target, without query (see `HTTPRequestHead.path(of:)`).
  public var path: String
  /// The minor version of HTTP/1.x (0 or 1; higher minors are kept as sent).
  public var versionMinor: Int
  /// Header fields in order, names as sent, values without surrounding
  /// whitespace (RFC 7230 §3.2.4).
  public var headers: [(name: String, value: String)]

  /// A head from its parts; `path` is derived from `target`.
  public init(
    method: String, target: String, versionMinor: Int,
    headers: [(name: String, value: String)]
  ) {
    self.method = method
    self.target = target
    self.path = Self.path(of: target)
    self.versionMinor = versionMinor
    self.headers = headers
  }

  /// The value of the first field named `name` (case-insensitive, §3.2).
  public func header(_ name: String) -> String? {
    headers.first { Self.namesEqual($0.name, name) }?.value
  }

  /// Every value of every field named `name`, split on commas and trimmed,
  /// empty elements dropped: the list form of RFC 7230 §7 (repeated fields
  /// are equivalent to one comma-joined field, §3.2.2).
  public func headerValues(_ name: String) -> [String] {
    var values: [String] = []
    for field in headers where Self.namesEqual(field.name, name) {
      for element in field.value.split(separator: ",", omittingEmptySubsequences: true) {
        let trimmed = element.trimmingSpaces()
        if !trimmed.isEmpty { values.append(trimmed) }
      }
    }
    return values
  }

  /// How many fields are named `name` (to refuse duplicates, e.g. Host).
  public func headerCount(_ name: String) -> Int {
    headers.lazy.filter { Self.namesEqual($0.name, name) }.count
  }

  /// Whether the list-valued field `name` contains `token`, compared
  /// case-insensitively (Connection and Upgrade tokens, RFC 7230 §6.1, §6.7).
  public func headerContainsToken(_ name: String, _ token: String) -> Bool {
    var token = token
    return token.withUTF8 { wanted in
      headers.contains { field in
        guard Self.namesEqual(field.name, name) else { return false }
        var value = field.value
        return value.withUTF8 { Self.list($0, contains: wanted) }
      }
    }
  }

  /// Whether a comma-separated list holds `token` as one element, spaces and tabs
  /// around elements ignored, ASCII case ignored; scanned in place.
  static func list(_ value: UnsafeBufferPointer<UInt8>, contains token: UnsafeBufferPointer<UInt8>) -> Bool {
    let space = UInt8(ascii: " "), tab = UInt8(ascii: "\t"), comma = UInt8(ascii: ",")
    var start = 0
    while start <= value.count {
      var end = start
      while end < value.count && value[end] != comma { end += 1 }
      var low = start
      var high = end
      while low < high && (value[low] == space || value[low] == tab) { low += 1 }
      while high > low && (value[high - 1] == space || value[high - 1] == tab) { high -= 1 }
      if high - low == token.count {
        var same = true
        for k in 0..<token.count where lowerASCII(value[low + k]) != lowerASCII(token[k]) {
          same = false
          break
        }
        if same && !token.isEmpty { return true }
      }
      start = end + 1
    }
    return false
  }

  /// The path part of a request-target (RFC 7230 §5.3): up to "?" for
  /// origin-form, the path after the authority for absolute-form, the
  /// target itself for asterisk- and authority-form.
  public static func path(of target: String) -> String {
    var rest = Substring(target)
    if !rest.hasPrefix("/"), let scheme = rest.firstRange(of: "://") {
      rest = rest[scheme.upperBound...]
      guard let slash = rest.firstIndex(of: "/") else { return "/" }
      rest = rest[slash...]
    }
    if let query = rest.firstIndex(of: "?") { rest = rest[..<query] }
    return String(rest)
  }

  /// ASCII case-insensitive comparison (field names and tokens are ASCII).
  /// ASCII case-insensitive equality over the UTF-8 bytes, compared in place
  /// (`zip` over two `UTF8View`s walked them index by index, the upgrade's costliest step).
  static func namesEqual(_ a: String, _ b: String) -> Bool {
    guard a.utf8.count == b.utf8.count else { return false }
    var a = a
    var b = b
    return a.withUTF8 { x in
      b.withUTF8 { y in
        for i in 0..<x.count where lowerASCII(x[i]) != lowerASCII(y[i]) { return false }
        return true
      }
    }
  }

  @inline(__always) static func lowerASCII(_ byte: UInt8) -> UInt8 {
    byte >= 0x41 && byte <= 0x5A ? byte | 0x20 : byte
  }

}

extension HTTPRequestHead {
  /// The body length: 0 without `Content-Length`; nil when the header is repeated or
  /// is not 1*DIGIT (RFC 9110 §8.6), or too long to be any body we read, so a
  /// sign, spaces inside or an overflowing value are a 400, never a trap.
  public var contentLength: Int? {
    let values = headers.filter { Self.namesEqual($0.name, "Content-Length") }
    guard let only = values.first else { return 0 }
    let digits = only.value.utf8
    guard values.count == 1, (1...18).contains(digits.count),
      digits.allSatisfy({ $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") })
    else { return nil }
    return Int(only.value)
  }
}

