// The state a UI renders: connection, sessions (participants and the hand queue in
// server order) and calls. Updated on the callback queue, before the listeners of
// the same step run. On Apple platforms it is `@Observable` for SwiftUI; on Linux
// the same properties are plain, lock-protected reads (usable from tests).

public import RelayClientCore

#if canImport(Darwin) && canImport(Observation)
  public import Observation

  /// Observable client state. Mutated on the client's callback queue (the main
  /// queue by default): read it from SwiftUI views on that queue.
  @Observable
  public final class RelayClientState: @unchecked Sendable {
    /// Where the connection stands.
    public internal(set) var connectionState: ConnectionState = .disconnected
    /// Joined sessions by id.
    public internal(set) var sessions: [String: SessionState] = [:]
    /// Calls by id, terminal ones included (with their final status).
    public internal(set) var calls: [String: Call] = [:]
    /// The user the relay identified in `welcome`.
    public internal(set) var user: CallUser?
    /// `welcome.resumed` of the current connection: the relay still held this
    /// client's place (§9), after a drop or, with `persistence`, a relaunch.
    public internal(set) var resumed = false

    init() {}

    func update(_ s: ClientMachine.Snapshot) {
      if connectionState != s.connectionState { connectionState = s.connectionState }
      if sessions != s.sessions { sessions = s.sessions }
      if calls != s.calls { calls = s.calls }
      if user != s.user { user = s.user }
      if resumed != s.resumed { resumed = s.resumed }
    }
  }
#else
  import Foundation

  /// Client state as plain readable properties (Observation is used on Apple
  /// platforms only). Thread-safe reads; updated on the client's callback queue.
  public final class RelayClientState: @unchecked Sendable {
    private let lock = NSLock()
    private var value = ClientMachine.Snapshot()

    init() {}

    /// Where the connection stands.
    public var connectionState: ConnectionState { lock.withLock { value.connectionState } }
    /// Joined sessions by id.
    public var sessions: [String: SessionState] { lock.withLock { value.sessions } }
    /// Calls by id, terminal ones included (with their final status).
    public var calls: [String: Call] { lock.withLock { value.calls } }
    /// The user the relay identified in `welcome`.
    public var user: CallUser? { lock.withLock { value.user } }
    /// `welcome.resumed` of the current connection: the relay still held this
    /// client's place (§9), after a drop or, with `persistence`, a relaunch.
    public var resumed: Bool { lock.withLock { value.resumed } }

    func update(_ s: ClientMachine.Snapshot) { lock.withLock { value = s } }
  }
#endif

extension RelayClientState {
  /// The participants of `sessionID` in join order (empty when not joined).
  public func participants(in sessionID: String) -> [Participant] {
    sessions[sessionID]?.participants ?? []
  }

  /// The raised-hands queue of `sessionID` in server order (first raised first).
  public func raisedHands(in sessionID: String) -> [RaisedHand] {
    sessions[sessionID]?.hands ?? []
  }
}
