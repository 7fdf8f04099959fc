/// Where a Sentinel-managed Redis is (contract §12):
/// `redis+sentinel://[[USER]:PASSWORD@]HOST:PORT[,HOST:PORT…]/MASTER_NAME[/DB][?sentinel_user=U&sentinel_password=P]`,
/// or `rediss+sentinel://…` to speak TLS to the sentinels and the primary alike
/// (managed services that require TLS require it everywhere). The sentinels are
/// asked, in the order given, for the address of the primary named `MASTER_NAME`;
/// the user, password and database apply to the primary (and its replicas); the
/// sentinels take their own credentials from the query, if they need any.
public struct SentinelAddress: Sendable, Equatable {
  /// The sentinels, each as `host` and `port` (default 26379).
  public var sentinels: [HostPort]
  public var masterName: String
  public var user: String?
  public var password: String?
  public var db: Int
  public var tls = false
  public var sentinelUser: String?
  public var sentinelPassword: String?

  public struct HostPort: Sendable, Equatable {
    public var host: String
    public var port: Int
  }

  static let scheme = "redis+sentinel://"
  static let tlsScheme = "rediss+sentinel://"
  static let defaultPort = 26_379

  /// Nil for anything that is not such a URL. `localhost` becomes 127.0.0.1, as for
  /// `redis://` (the connector takes IP literals; other names are looked up).
  public init?(url: String) {
    if url.hasPrefix(Self.tlsScheme) {
      tls = true
    } else if !url.hasPrefix(Self.scheme) {
      return nil
    }
    var rest = Substring(url.dropFirst(tls ? Self.tlsScheme.count : Self.scheme.count))
    (user, password) = RedisAddress.takeCredentials(&rest)
    if let mark = rest.firstIndex(of: "?") {
      guard let query = Self.readQuery(rest[rest.index(after: mark)...]) else { return nil }
      (sentinelUser, sentinelPassword) = query
      rest = rest[..<mark]
    }
    let parts = rest.split(separator: "/", omittingEmptySubsequences: false)
    guard parts.count == 2 || parts.count == 3 else { return nil }
    guard !parts[1].isEmpty, parts[1].allSatisfy({ $0.isASCII && !$0.isWhitespace }) else { return nil }
    masterName = String(parts[1])
    db = 0
    if parts.count == 3, !parts[2].isEmpty {
      guard let n = Int(parts[2]), n >= 0 else { return nil }
      db = n
    }
    var list: [HostPort] = []
    for item in parts[0].split(separator: ",", omittingEmptySubsequences: false) {
      guard let hostPort = Self.hostPort(item) else { return nil }
      list.append(hostPort)
    }
    guard !list.isEmpty else { return nil }
    sentinels = list
  }

  /// `sentinel_user=U&sentinel_password=P` (either, both, in any order); nil for
  /// any other key, so a misspelt option is refused rather than ignored.
  private static func readQuery(_ query: Substring) -> (user: String?, password: String?)? {
    var found: (user: String?, password: String?) = (nil, nil)
    for pair in query.split(separator: "&") {
      guard let eq = pair.firstIndex(of: "=") else { return nil }
      let value = pair[pair.index(after: eq)...]
      switch pair[..<eq] {
      case "sentinel_user": found.user = value.isEmpty ? nil : String(value)
      case "sentinel_password": found.password = value.isEmpty ? nil : String(value)
      default: return nil
      }
    }
    return found
  }

  /// `HOST[:PORT]`, with `[v6]` brackets allowed.
  private static func hostPort(_ text: Substring) -> HostPort? {
    var host = text
    var port = defaultPort
    if let colon = text.lastIndex(of: ":"), !text.hasSuffix("]") {
      guard let p = Int(text[text.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
      host = text[..<colon]
    }
    if host.hasPrefix("["), host.hasSuffix("]") { host = host.dropFirst().dropLast() }
    guard !host.isEmpty, !host.contains("["), !host.contains("]") else { return nil }
    return HostPort(host: host == "localhost" ? "127.0.0.1" : String(host), port: port)
  }

  /// The address of one sentinel, to open a connection to it (its own credentials, db 0).
  func sentinel(_ index: Int) -> RedisAddress {
    RedisAddress(
      host: sentinels[index].host, port: sentinels[index].port, user: sentinelUser, password: sentinelPassword, db: 0,
      tls: tls)
  }

  /// The primary at `host:port` as a sentinel named it, with this URL's credentials and db.
  public func primary(host: String, port: Int) -> RedisAddress {
    RedisAddress(host: host, port: port, user: user, password: password, db: db, tls: tls)
  }

  /// A sentinel's reply to `SENTINEL get-master-addr-by-name`: `[host, port]`, or
  /// nil (null: the name is unknown to it) — untrusted input like any reply.
  static func primaryAddress(fromReply reply: [String?]) -> HostPort? {
    guard reply.count == 2, let host = reply[0], !host.isEmpty, host.utf8.count <= 255,
      let portText = reply[1], let port = Int(portText), (1...65535).contains(port)
    else { return nil }
    return HostPort(host: host, port: port)
  }

  /// A `+switch-master` message (`<name> <old-ip> <old-port> <new-ip> <new-port>`):
  /// the new primary if it is about this master name.
  func switchedPrimary(message: String) -> HostPort? {
    let words = message.split(separator: " ")
    guard words.count == 5, words[0] == masterName else { return nil }
    return Self.primaryAddress(fromReply: [String(words[3]), String(words[4])])
  }
}

/// Which Redis a cluster node uses: one fixed address, or whatever primary the
/// sentinels name.
public enum RedisTarget: Sendable, Equatable {
  case direct(RedisAddress)
  case sentinel(SentinelAddress)

  /// `redis[s]://…` or `redis[s]+sentinel://…`; nil for anything else.
  public init?(url: String) {
    if let s = SentinelAddress(url: url) {
      self = .sentinel(s)
    } else if let a = RedisAddress(url: url) {
      self = .direct(a)
    } else {
      return nil
    }
  }

  /// For logs: never the password.
  public var description: String {
    switch self {
    case .direct(let a): return (a.tls ? "tls " : "") + "\(a.host):\(a.port)"
    case .sentinel(let s):
      return (s.tls ? "tls " : "") + "sentinel " + s.sentinels.map { "\($0.host):\($0.port)" }.joined(separator: ",") + "/\(s.masterName)"
    }
  }
}
