/// Where the cluster's Redis is (contract §12): `redis://[[USER]:PASSWORD@]HOST:PORT[/DB]`,
/// or `rediss://…` for TLS (managed Redis services), trusted as every outbound TLS
/// connection is: the system's roots plus `--tls-ca-file`.
public struct RedisAddress: Sendable, Equatable {
  public var host: String
  public var port: Int
  /// A Redis 6 ACL user (`AUTH USER PASSWORD`); nil means `default` (`AUTH PASSWORD`).
  public var user: String?
  public var password: String?
  public var db: Int
  /// `rediss://`: the connection speaks TLS, and the server's certificate must name
  /// `serverName`.
  public var tls = false
  /// The host as the URL wrote it (`localhost` included), for certificate checks.
  public var serverName: String

  /// The credentials at the start of a URL's authority (`[[USER]:PASSWORD@]`, split
  /// at the first colon so passwords may hold colons and `@`, the last `@` ending
  /// them): removed from `rest`. Empty parts are nil.
  static func takeCredentials(_ rest: inout Substring) -> (user: String?, password: String?) {
    guard let at = rest.lastIndex(of: "@") else { return (nil, nil) }
    let credentials = rest[..<at]
    rest = rest[rest.index(after: at)...]
    guard let colon = credentials.firstIndex(of: ":") else {
      // `redis://PASSWORD@host` (no colon) as older clients wrote it.
      return (nil, credentials.isEmpty ? nil : String(credentials))
    }
    let user = credentials[..<colon]
    let password = credentials[credentials.index(after: colon)...]
    return (user.isEmpty ? nil : String(user), password.isEmpty ? nil : String(password))
  }

  /// Nil for anything that is not such a URL. `localhost` becomes 127.0.0.1: the
  /// connector takes IP literals.
  public init?(url: String) {
    if url.hasPrefix("rediss://") {
      tls = true
    } else if !url.hasPrefix("redis://") {
      return nil
    }
    var rest = Substring(url.dropFirst(tls ? "rediss://".count : "redis://".count))
    (user, password) = Self.takeCredentials(&rest)
    db = 0
    if let slash = rest.firstIndex(of: "/") {
      let tail = rest[rest.index(after: slash)...]
      if !tail.isEmpty {
        guard let n = Int(tail), n >= 0 else { return nil }
        db = n
      }
      rest = rest[..<slash]
    }
    var hostPart = rest
    port = 6379
    if let colon = rest.lastIndex(of: ":"), !rest.hasSuffix("]") {
      guard let p = Int(rest[rest.index(after: colon)...]), (1...65535).contains(p) else { return nil }
      port = p
      hostPart = rest[..<colon]
    }
    if hostPart.hasPrefix("["), hostPart.hasSuffix("]") { hostPart = hostPart.dropFirst().dropLast() }
    guard !hostPart.isEmpty else { return nil }
    serverName = String(hostPart)
    host = hostPart == "localhost" ? "127.0.0.1" : String(hostPart)
  }

  /// An address given part by part (a primary named by a sentinel, or a sentinel).
  public init(host: String, port: Int, user: String? = nil, password: String?, db: Int, tls: Bool = false) {
    self.host = host
    self.port = port
    self.user = user
    self.password = password
    self.db = db
    self.tls = tls
    serverName = host
  }

  /// The commands that make a new connection usable: `AUTH` (ACL user or not), `SELECT`.
  var setupCommands: [[String]] {
    var setup: [[String]] = []
    if let password { setup.append(["AUTH"] + (user.map { [$0] } ?? []) + [password]) }
    if db != 0 { setup.append(["SELECT", String(db)]) }
    return setup
  }
}
