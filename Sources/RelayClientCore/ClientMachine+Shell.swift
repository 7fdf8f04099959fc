// Inputs for a shell that times its own reconnects and applies some session
// events itself: relay-bots, which drops connections on purpose and resumes
// them at chosen moments (§5, §8), and checks the session events it receives
// before any client logic sees them. Apps do not need these.

public import RelayProtocol

extension ClientMachine {
  /// One text message the shell has already parsed (a shell that reads some of
  /// its fields itself parses it once); otherwise as `received(text:nowMs:)`.
  public mutating func received(message: JSONObject, nowMs: Int64) -> [ClientEffect] {
    receivedParsed(message, nowMs: nowMs)
  }

  /// Starts the pending reconnect attempt now rather than at `reconnectAtMs`
  /// (no-op while a transport is active, or when the machine is not reconnecting).
  public mutating func reconnectNow(nowMs: Int64) -> [ClientEffect] {
    guard !transportActive, reconnectAtMs != nil else { return [] }
    reconnectAtMs = nil
    startAttempt(nowMs: nowMs)
    return flush()
  }

  /// The shell applied `session`'s events itself up to `seq` (they were not fed to
  /// `received`): the next `hello.resume` asks for the events after it (§8).
  /// Ignored for a session the machine does not hold.
  public mutating func sessionEventsApplied(session: String, through seq: Int64) {
    guard snapshot.sessions[session] != nil else { return }
    snapshot.sessions[session]?.seq = seq
  }

  /// The resume token from the latest `welcome` (§8), nil before the first.
  public var currentResumeToken: String? { resumeToken }
}
