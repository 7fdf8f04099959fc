import ArgumentParser
import EventLoop
import RelayProtocol
import RelayServer
import RelayPrimitives

/// `relay token`: prints a signed HS256 token for operators and bots.
struct Token: ParsableCommand {
  static let configuration = CommandConfiguration(abstract: "Print a signed hello token.")

  @Option(help: "HS256 secret (or RELAY_SECRET).") var secret: String?
  @Option(help: "User id (the sub claim).") var sub: String
  @Option(help: "Display name.") var name: String?
  @Option(help: "Avatar URL.") var avatar: String?
  @Option(help: "Comma-separated session ids the user may join; * for any.") var sessions: String?
  @Option(help: "host or participant.") var role: String?
  @Option(help: "Lifetime in ms (default 3600000).") var ttl: Int64 = 3_600_000

  func run() throws {
    guard let secret = secret ?? Env.string("secret") else { throw ValidationError("--secret (or RELAY_SECRET) is required") }
    var parsedRole: Role?
    if let role {
      guard let r = Role(rawValue: role) else { throw ValidationError("--role must be host or participant") }
      parsedRole = r
    }
    guard (1...Tokens.maxTTLMs).contains(ttl) else { throw ValidationError("--\(Tokens.ttlRule)") }
    let list = sessions.map { $0.split(separator: ",").map { $0.trimmingSpaces() } }
    print(Tokens.mint(
      secret: secret, sub: sub, name: name, avatar: avatar, sessions: list, role: parsedRole,
      ttlMs: ttl, nowWallMs: Loop.wallClockMs()))
  }
}
