extension StringProtocol {
  /// Without optional whitespace (SP / HTAB, RFC 7230 §3.2.3) at both ends: header
  /// values, and lists in flags.
  public func trimmingSpaces() -> String {
    let isOWS: (Character) -> Bool = { $0 == " " || $0 == "\t" }
    guard let first = firstIndex(where: { !isOWS($0) }) else { return "" }
    let last = lastIndex(where: { !isOWS($0) })!
    return String(self[first...last])
  }
}
