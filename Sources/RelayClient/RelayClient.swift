// The public client: the API calling apps know, over `ClientMachine` and a platform
// transport. Commands go to the transport's thread through its mailbox; events,
// replies and state come back on the app's callback queue.

public import Dispatch
public import Foundation
@_exported public import RelayClientCore
@_exported public import RelayProtocol

/// The thread-safe handle of a transport thread.
protocol TransportHandle: Sendable {
  func post(_ input: RunnerInput)
}

/// Tunables of `RelayClient` (durations in ms).
public struct RelayClientOptions: Sendable {
  /// Full-jitter backoff base: attempt n waits random(0, min(cap, base · 2ⁿ)).
  public var backoffBaseMs: Int64 = 500
  /// Longest single backoff delay.
  public var backoffCapMs: Int64 = 20_000
  /// How long one connection attempt may take until `welcome`.
  public var connectTimeoutMs: Int64 = 10_000
  /// The app install named in `hello.device` (§4), which push registrations and
  /// the relay's "awake" check refer to: by default an id generated once and kept
  /// in the app's container (`RelayDeviceID.defaultFile`).
  public var device: DeviceIdentity = .persistent()
  /// Keep the place (resume token, sessions, last `seq`s) in a file, so an app
  /// relaunched within grace (woken by a VoIP push, say) resumes its sessions and
  /// its ringing call instead of joining afresh (§9). Off by default; `disconnect()`
  /// removes the file.
  public var persistence: ResumePersistence = .none

  /// The defaults: 500 ms to 20 s backoff, 10 s per attempt.
  public init() {}

  /// Which socket implementation carries the protocol (tests pick `.urlSession`
  /// on Linux to run the Apple transport against the relay).
  var transport: TransportKind = .platformDefault
}

/// The socket implementations of `RelayClient`.
enum TransportKind: Sendable {
  /// `URLSessionWebSocketTask` (Apple platforms; FoundationNetworking on Linux).
  case urlSession
  /// The project's EventLoop and RelayWebSocket on a thread of their own (Linux).
  case loop

  #if canImport(Darwin)
    static let platformDefault = TransportKind.urlSession
  #else
    static let platformDefault = TransportKind.loop
  #endif
}

/// A client of a Relay server: one WebSocket, resumed across network failures, with
/// sessions (participants, raised hands, messages) and calls.
///
///     let client = RelayClient(url: URL(string: "wss://relay.example.com/v1/ws")!,
///                              auth: .token(jwt))
///     client.addCallListener(id: "calls", self)
///     try await client.connect()
///     let room: SessionState = try await client.joinSession(sessionID: "standup")
///     for await event in client.events { … }
///
/// Thread-safe: call it from any thread. Listener callbacks, `events` and `state`
/// updates happen on `callbackQueue`, in the order the relay sent the events; a
/// listener added from the main actor is called on the main actor.
public final class RelayClient: @unchecked Sendable {
  /// The relay's WebSocket URL (`…/v1/ws`).
  public let url: URL
  /// The identity sent in the next `hello` (see `updateAuth(_:)`).
  public var auth: RelayAuth { lock.withLock { currentAuth } }
  /// Where callbacks run: the main queue by default on Apple platforms, a private
  /// serial queue on Linux.
  public let callbackQueue: DispatchQueue
  /// Observable state for the UI; see `RelayClientState`.
  public let state = RelayClientState()
  /// The id sent as `hello.device` (from `RelayClientOptions.device`), nil for none.
  public let deviceID: String?

  private let lock = NSLock()
  private var currentAuth: RelayAuth
  private var transport: (any TransportHandle)?
  private let configuration: ClientConfiguration
  private let transportKind: TransportKind
  private let persistence: ResumePersistence
  private var nextRequestID: UInt64 = 1
  private var replyWaiters: [UInt64: CheckedContinuation<(reply: CommandReply, state: ClientMachine.Snapshot), Never>] = [:]
  private var connectWaiters: [CheckedContinuation<Result<Void, RelayError>, Never>] = []
  private var sessionListeners: [Registered<any SessionStatusListener>] = []
  private var participantListeners: [Registered<any ParticipantEventListener>] = []
  private var callListeners: [Registered<any CallListener>] = []
  private var eventStreams: [UInt64: AsyncStream<ClientEvent>.Continuation] = [:]
  private var nextStreamID: UInt64 = 0

  /// Creates a client; nothing happens until `connect()`. `url` is `ws://` or
  /// `wss://` (on Linux TLS is verified against the system's trust store, which
  /// `SSL_CERT_FILE` overrides); host names are resolved at each connection attempt.
  public init(
    url: URL, auth: RelayAuth, options: RelayClientOptions = RelayClientOptions(),
    callbackQueue: DispatchQueue? = nil
  ) {
    self.url = url
    currentAuth = auth
    var configuration = ClientConfiguration(auth: auth)
    configuration.backoffBaseMs = options.backoffBaseMs
    configuration.backoffCapMs = options.backoffCapMs
    configuration.connectTimeoutMs = options.connectTimeoutMs
    deviceID = RelayDeviceID.resolve(options.device)
    configuration.device = deviceID
    transportKind = options.transport
    persistence = options.persistence
    // URLSession answers pings without telling us: keep liveness with app pings (§5).
    configuration.sendsAppPings = options.transport == .urlSession
    #if canImport(Darwin)
      self.callbackQueue = callbackQueue ?? .main
    #else
      // A programmer error, caught at construction rather than at the first connect.
      precondition(
        WebSocketEndpoint(url) != nil, "RelayClient needs a ws:// or wss:// URL; got \(url)")
      self.callbackQueue = callbackQueue ?? DispatchQueue(label: "RelayClient.callbacks")
    #endif
    self.configuration = configuration
  }

  deinit {
    transport?.post(.shutdown)
    for continuation in eventStreams.values { continuation.finish() }
  }

  /// The current connection state (also `state.connectionState`).
  public var connectionState: ConnectionState { state.connectionState }

  // MARK: - Connection

  /// Connects (and keeps reconnecting with backoff until `disconnect()` or a final
  /// close code). Returns at once; watch `state` or the session status listener.
  public func connect() {
    post(.connect)
  }

  /// Connects and waits for the first `welcome`.
  /// - Throws: `.closed(code:)` when the relay refused for good (e.g. 4501 bad
  ///   token), `.notConnected` when `disconnect()` came first.
  public func connect() async throws(RelayError) {
    let result: Result<Void, RelayError> = await withCheckedContinuation { continuation in
      lock.withLock { connectWaiters.append(continuation) }
      post(.connect)
    }
    try result.get()
  }

  /// Closes the connection cleanly (the relay tells the others `participant.left`)
  /// and stops reconnecting. Pending commands fail with `.notConnected`.
  public func disconnect() {
    post(.disconnect)
  }

  /// Ends this client as a killed app would: the kept place (`persistence`) is
  /// written, the socket is cut without a close frame, so the relay holds the user
  /// as lost (§8) and a new client (or the relaunched app) resumes within grace.
  public func suspend() {
    post(.suspend)
  }

  /// Tells the relay the app is going to (true) or back from (false) the background
  /// (`client.background`, §5), so a connection lost meanwhile is kept for the
  /// longer background grace. Remembered across reconnects.
  public func setBackground(_ isBackground: Bool) {
    post(.background(isBackground))
  }

  /// Replaces the identity for the next connection attempt: after the relay closed
  /// with 4501 (bad or expired token), fetch a new token, call this, then
  /// `connect()`. A token about to expire can be swapped in ahead of time too.
  public func updateAuth(_ auth: RelayAuth) {
    lock.withLock { currentAuth = auth }
    post(.auth(auth))
  }

  // MARK: - Listeners
  //
  // `isolation` is the caller's actor, filled in by the compiler: a listener added
  // from the main actor (a `@MainActor` view model conforming with
  // `extension Model: @MainActor CallListener`) is always called on the main actor,
  // even with a `callbackQueue` other than the main queue.

  /// Adds (or replaces, by `id`) a session status listener. Held strongly until removed.
  public func addSessionStatusListener(
    id: String, _ listener: any SessionStatusListener, isolation: isolated (any Actor)? = #isolation
  ) {
    let entry = Registered(id: id, listener: listener, onMainActor: Self.isMainActor(isolation))
    lock.withLock {
      sessionListeners.removeAll { $0.id == id }
      sessionListeners.append(entry)
    }
  }

  /// Removes the session status listener added with `id`.
  public func removeSessionStatusListener(id: String) {
    lock.withLock { sessionListeners.removeAll { $0.id == id } }
  }

  /// Adds (or replaces, by `id`) a participant event listener. Held strongly until removed.
  public func addParticipantEventListener(
    id: String, _ listener: any ParticipantEventListener, isolation: isolated (any Actor)? = #isolation
  ) {
    let entry = Registered(id: id, listener: listener, onMainActor: Self.isMainActor(isolation))
    lock.withLock {
      participantListeners.removeAll { $0.id == id }
      participantListeners.append(entry)
    }
  }

  /// Removes the participant event listener added with `id`.
  public func removeParticipantEventListener(id: String) {
    lock.withLock { participantListeners.removeAll { $0.id == id } }
  }

  /// Adds (or replaces, by `id`) a call listener. Held strongly until removed.
  public func addCallListener(
    id: String, _ listener: any CallListener, isolation: isolated (any Actor)? = #isolation
  ) {
    let entry = Registered(id: id, listener: listener, onMainActor: Self.isMainActor(isolation))
    lock.withLock {
      callListeners.removeAll { $0.id == id }
      callListeners.append(entry)
    }
  }

  /// Removes the call listener added with `id`.
  public func removeCallListener(id: String) {
    lock.withLock { callListeners.removeAll { $0.id == id } }
  }

  private static func isMainActor(_ isolation: (any Actor)?) -> Bool {
    guard let isolation else { return false }
    return isolation === MainActor.shared
  }

  // MARK: - Events as an AsyncSequence

  /// Every event from now on, in the order the listeners get them:
  ///
  ///     for await event in client.events {
  ///       if case .incomingCall(let call) = event { … }
  ///     }
  ///
  /// Each access is a new subscription with its own unbounded buffer; it ends when
  /// the loop is cancelled or the client is released. Events only: replies come
  /// back from the async commands, state is in `state`.
  public var events: AsyncStream<ClientEvent> {
    let (stream, continuation) = AsyncStream.makeStream(of: ClientEvent.self, bufferingPolicy: .unbounded)
    let id: UInt64 = lock.withLock {
      nextStreamID += 1
      eventStreams[nextStreamID] = continuation
      return nextStreamID
    }
    continuation.onTermination = { [weak self] _ in
      guard let self else { return }
      _ = self.lock.withLock { self.eventStreams.removeValue(forKey: id) }
    }
    return stream
  }

  // MARK: - Plumbing

  func post(_ input: RunnerInput) {
    let handle: any TransportHandle = lock.withLock {
      if let transport { return transport }
      let made = makeTransport()
      transport = made
      return made
    }
    handle.post(input)
  }

  /// Sends `command` and waits for the server's reply (delivered on the callback
  /// queue after the state it caused, for joins and leaves).
  func request(_ command: ClientCommand) async -> CommandReply {
    await requestWithState(command).reply
  }

  /// `request`, with the state as it was right after the reply (for typed results).
  func requestWithState(_ command: ClientCommand) async -> (reply: CommandReply, state: ClientMachine.Snapshot) {
    await withCheckedContinuation { continuation in
      let id: UInt64 = lock.withLock {
        let id = nextRequestID
        nextRequestID += 1
        replyWaiters[id] = continuation
        return id
      }
      post(.command(command, requestID: id))
    }
  }

  /// Called under `lock`.
  private func makeTransport() -> any TransportHandle {
    let deliver: @Sendable (DeliveryBatch) -> Void = { [weak self] batch in
      guard let self else { return }
      self.callbackQueue.async { self.apply(batch) }
    }
    let seed = UInt64.random(in: 1...UInt64.max)
    var current = self.configuration
    current.auth = currentAuth
    let configuration = current
    let (persistence, url) = (self.persistence, self.url)
    let makeRunner: @Sendable () -> ClientRunner = {
      ClientRunner(
        configuration: configuration, seed: seed, resumeFile: ResumeFile(persistence, relay: url), deliver: deliver)
    }
    #if canImport(EventLoop)
      if transportKind == .loop {
        let endpoint = WebSocketEndpoint(url)!  // checked in init
        return LoopThreadHandle(LoopThread(endpoint: endpoint, makeRunner: makeRunner))
      }
    #endif
    return URLSessionTransport(url: url, makeRunner: makeRunner)
  }

  /// Runs on `callbackQueue`: state first, then listeners, event streams and replies
  /// in order. Listeners added from the main actor run there: directly when this
  /// is the main queue, else in a block queued on it per batch (in batch order).
  private func apply(_ batch: DeliveryBatch) {
    state.update(batch.snapshot)
    let (sessions, participants, calls, streams) = lock.withLock {
      (sessionListeners, participantListeners, callListeners, Array(eventStreams.values))
    }
    // Not `Thread.isMainThread`: on Linux a worker thread drains the main queue.
    let onMainQueue = callbackQueue === DispatchQueue.main
    let here = Listeners(sessions, participants, calls) { onMainQueue || !$0 }
    let forMain = onMainQueue ? nil : Listeners(sessions, participants, calls) { $0 }
    var mainEvents: [ClientEvent] = []
    for effect in batch.effects {
      switch effect {
      case .event(let event):
        if case .connectionClosed(let code, _) = event { lastCloseCode = code }
        dispatch(event, sessions: here.sessions, participants: here.participants, calls: here.calls)
        if let forMain, !forMain.isEmpty { mainEvents.append(event) }
        for stream in streams { stream.yield(event) }
      case .reply(let id, let reply):
        lock.withLock { replyWaiters.removeValue(forKey: id) }?.resume(returning: (reply, batch.snapshot))
      default:
        break
      }
    }
    if let forMain, !mainEvents.isEmpty {
      let deliver = UncheckedBox((forMain, mainEvents))
      DispatchQueue.main.async {
        let (listeners, events) = deliver.value
        for event in events {
          dispatch(event, sessions: listeners.sessions, participants: listeners.participants, calls: listeners.calls)
        }
      }
    }
    resolveConnectWaiters(batch.snapshot.connectionState)
  }

  private func resolveConnectWaiters(_ connection: ConnectionState) {
    let outcome: Result<Void, RelayError>
    switch connection {
    case .connected: outcome = .success(())
    case .disconnected: outcome = .failure(.notConnected)
    case .closed:
      // The code came with the `connectionClosed` event of this or an earlier batch.
      outcome = .failure(.closed(code: lastCloseCode))
    case .connecting, .reconnecting: return
    }
    let waiters = lock.withLock {
      defer { connectWaiters = [] }
      return connectWaiters
    }
    for waiter in waiters { waiter.resume(returning: outcome) }
  }

  /// Touched only on `callbackQueue`.
  private var lastCloseCode: UInt16 = 0
}

/// A registered listener and where it must be called.
struct Registered<Listener> {
  var id: String
  var listener: Listener
  /// Added from the main actor: called on the main actor.
  var onMainActor: Bool
}

/// The listeners of one batch, picked by where they run.
struct Listeners {
  var sessions: [any SessionStatusListener]
  var participants: [any ParticipantEventListener]
  var calls: [any CallListener]

  init(
    _ s: [Registered<any SessionStatusListener>], _ p: [Registered<any ParticipantEventListener>],
    _ c: [Registered<any CallListener>], where include: (Bool) -> Bool
  ) {
    sessions = s.filter { include($0.onMainActor) }.map(\.listener)
    participants = p.filter { include($0.onMainActor) }.map(\.listener)
    calls = c.filter { include($0.onMainActor) }.map(\.listener)
  }

  var isEmpty: Bool { sessions.isEmpty && participants.isEmpty && calls.isEmpty }
}

/// Carries listeners (not `Sendable`: they are the app's objects) to the main queue,
/// where the ones added from the main actor belong.
struct UncheckedBox<Value>: @unchecked Sendable {
  let value: Value
  init(_ value: Value) { self.value = value }
}

#if canImport(EventLoop)
  /// `LoopThread` as a `TransportHandle`.
  struct LoopThreadHandle: TransportHandle {
    let thread: LoopThread
    init(_ thread: LoopThread) { self.thread = thread }
    func post(_ input: RunnerInput) { thread.post(input) }
  }
#endif
