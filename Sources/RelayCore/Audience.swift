// How far what a connection says can reach: the shell's read lanes use it to tell a
// client of a small session from a member of a big room before reading what it
// sent (RelayServer+Turns.swift). A query, not an input: it changes nothing.

extension RelayCore {
  /// The most members of any session `c` is a member of (0 for an unknown
  /// connection or one in no session): how many deliveries one of its messages,
  /// joins or leaves may cause.
  public func audience(of c: ConnectionID) -> Int {
    guard let connection = connections[c] else { return 0 }
    var most = 0
    for id in connection.sessions {
      most = max(most, sessions[id]?.members.count ?? 0)
    }
    return most
  }
}
