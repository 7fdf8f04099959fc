// The Apple-platform transport: `URLSessionWebSocketTask`. It also compiles on
// Linux (FoundationNetworking has the same API), where it is tested behind a seam:
// `URLSessionWire` talks to the task through `WebSocketTaskSeam` and to time
// through `WireClock`, so a scripted fake task and a manual clock drive it in
// Tests/RelayClientTests/URLSessionWireTests.swift, the way `ClientMachine` is
// driven in RelayClientCoreTests. Every protocol rule stays in `ClientMachine`.
// Everything below runs on one serial queue.

#if canImport(Darwin) || canImport(FoundationNetworking)
  import Dispatch
  import Foundation
  #if canImport(FoundationNetworking)
    import FoundationNetworking
  #endif
  import RelayClientCore
  import RelayPrimitives

  // MARK: - The seam

  /// What the wire uses of one WebSocket task: `URLSessionWebSocketTask` in
  /// production (`URLSessionTaskAdapter`), a scripted fake in tests. Completion
  /// handlers run on the wire's queue.
  protocol WebSocketTaskSeam: AnyObject {
    func resume()
    func send(text: String)
    func receive(_ completion: @escaping (Result<URLSessionWebSocketTask.Message, any Error>) -> Void)
    func cancel(with closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?)
    func cancel()
    /// `.invalid` until a close frame arrived (and for codes `CloseCode` cannot name).
    var closeCode: URLSessionWebSocketTask.CloseCode { get }
    var closeReason: Data? { get }
    /// The error the task completed with, if any (diagnostics only).
    var failure: (any Error)? { get }
  }

  /// Makes one task per connection attempt and reports, on the wire's queue, when
  /// its opening handshake completed (`taskOpened`) and when it ended (`taskEnded`).
  protocol WebSocketConnector: AnyObject {
    func makeTask(url: URL, protocols: [String], for wire: URLSessionWire) -> any WebSocketTaskSeam
    func invalidate()
  }

  /// Monotonic time and the wire's one timer (fires on the wire's queue).
  protocol WireClock: AnyObject {
    var nowMs: Int64 { get }
    func arm(atMs: Int64?, _ fire: @escaping () -> Void)
  }

  // MARK: - The app-side handle

  /// Posts inputs onto the transport's serial queue.
  final class URLSessionTransport: TransportHandle, @unchecked Sendable {
    private let queue = DispatchQueue(label: "RelayClient.io")
    /// Set once on `queue`, read only there.
    private var wire: URLSessionWire?

    init(url: URL, makeRunner: @escaping @Sendable () -> ClientRunner) {
      queue.async { [self] in
        let runner = makeRunner()
        let wire = URLSessionWire(
          url: url, runner: runner, connector: URLSessionConnector(queue: queue), clock: DispatchClock(queue: queue))
        runner.wire = wire
        self.wire = wire
      }
    }

    func post(_ input: RunnerInput) {
      queue.async { [self] in
        guard let wire else { return }
        wire.runner.handle(input)
        if case .shutdown = input { wire.shutdown() }
      }
    }

    /// Runs `body` with the wire on its queue (tests: its diagnostics).
    func inspect<T: Sendable>(_ body: @escaping @Sendable (URLSessionWire) -> T) async -> T? {
      await withCheckedContinuation { continuation in
        queue.async { [self] in continuation.resume(returning: wire.map(body)) }
      }
    }
  }

  // MARK: - The wire

  /// The socket side of `ClientRunner` over `WebSocketTaskSeam`. Confined to the
  /// transport's queue (or, in tests, to the test's thread).
  final class URLSessionWire: WireTransport {
    let runner: ClientRunner
    private let url: URL
    private let connector: any WebSocketConnector
    private let clock: any WireClock
    private var task: (any WebSocketTaskSeam)?
    /// The current task completed its opening handshake.
    private var opened = false
    /// Why the last few tasks failed, newest last (diagnostics; at most 8).
    private(set) var failures: [String] = []

    /// The subprotocol of PROTOCOL.md §1.
    static let subprotocols = ["relay.v1"]

    init(url: URL, runner: ClientRunner, connector: any WebSocketConnector, clock: any WireClock) {
      self.url = url
      self.runner = runner
      self.connector = connector
      self.clock = clock
    }

    var nowMs: Int64 { clock.nowMs }

    func open() {
      let task = connector.makeTask(url: url, protocols: Self.subprotocols, for: self)
      self.task = task
      opened = false
      task.resume()
      receive(on: task)
    }

    /// One `receive` at a time, re-armed after each message (URLSession's model).
    private func receive(on task: any WebSocketTaskSeam) {
      task.receive { [weak self] result in
        guard let self, task === self.task else { return }
        switch result {
        case .success(.string(let text)):
          self.runner.transportText(Array(text.utf8))
          self.receive(on: task)
        case .success:
          // Binary: not part of the protocol (§1); still proof of life.
          self.runner.transportActivity()
          self.receive(on: task)
        case .failure:
          self.ended(task)
        }
      }
    }

    /// The opening handshake of `task` completed.
    func taskOpened(_ opened: any WebSocketTaskSeam) {
      guard opened === task else { return }
      self.opened = true
      runner.transportOpened()
    }

    /// `task` closed (close frame) or failed.
    func taskEnded(_ ended: any WebSocketTaskSeam) {
      self.ended(ended)
    }

    /// Reports the end of the current task once. `CloseCode` cannot carry the
    /// application range (4000–4999, §2): such a code arrives as `.invalid`, like a
    /// socket that died without a close frame. On a socket that was upgraded but got
    /// no `welcome` it is taken as final (in practice 4501, a refused token, where
    /// retrying blindly would not help); otherwise as temporary, so the client
    /// reconnects and resumes.
    private func ended(_ ended: any WebSocketTaskSeam) {
      guard ended === task else { return }
      task = nil
      var reason = ended.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
      if let failure = ended.failure {
        failures = Array((failures + ["\(failure)"]).suffix(8))
        if reason.isEmpty { reason = "\(failure)" }
      }
      let code: UInt16?
      switch ended.closeCode {
      case .invalid:
        code = opened && !runner.isConnected ? 4500 : nil
      case let known:
        code = UInt16(exactly: known.rawValue)
      }
      runner.transportClosed(code: code, reason: reason)
    }

    func send(_ text: [UInt8]) {
      task?.send(text: String(decoding: text, as: UTF8.self))
    }

    func close(code: UInt16?) {
      guard let closing = task else { return }
      task = nil
      if let code, let closeCode = URLSessionWebSocketTask.CloseCode(rawValue: Int(code)) {
        closing.cancel(with: closeCode, reason: nil)
      } else {
        closing.cancel()
      }
    }

    func drop() {
      // Reported back like any failed task (the delegate's completion).
      task?.cancel()
    }

    func armTimer(atMs: Int64?) {
      clock.arm(atMs: atMs) { [weak self] in self?.runner.tick() }
    }

    func shutdown() {
      clock.arm(atMs: nil) {}
      connector.invalidate()
    }
  }

  // MARK: - Production: URLSession and Dispatch

  /// One `URLSession` for the client's lifetime; its delegate callbacks and every
  /// completion handler are moved onto the transport's queue.
  final class URLSessionConnector: NSObject, WebSocketConnector, URLSessionWebSocketDelegate, @unchecked Sendable {
    private let queue: DispatchQueue
    private var session: URLSession?
    /// Touched on `queue` only: the adapters of live tasks, by task.
    private var live: [ObjectIdentifier: (adapter: URLSessionTaskAdapter, wire: URLSessionWire)] = [:]

    init(queue: DispatchQueue) {
      self.queue = queue
      super.init()
      let delegateQueue = OperationQueue()
      delegateQueue.underlyingQueue = queue
      delegateQueue.maxConcurrentOperationCount = 1
      session = URLSession(configuration: .default, delegate: self, delegateQueue: delegateQueue)
    }

    func makeTask(url: URL, protocols: [String], for wire: URLSessionWire) -> any WebSocketTaskSeam {
      guard let session else { return URLSessionTaskAdapter.dead(queue: queue) }
      let task = session.webSocketTask(with: url, protocols: protocols)
      task.maximumMessageSize = 16 << 20
      let adapter = URLSessionTaskAdapter(task: task, queue: queue)
      live[ObjectIdentifier(task)] = (adapter, wire)
      return adapter
    }

    func invalidate() {
      session?.invalidateAndCancel()
      session = nil
      live = [:]
    }

    private func onQueue(_ task: URLSessionTask, _ body: @escaping @Sendable (URLSessionTaskAdapter, URLSessionWire) -> Void) {
      let id = ObjectIdentifier(task)
      queue.async { [self] in
        guard let (adapter, wire) = live[id] else { return }
        body(adapter, wire)
      }
    }

    func urlSession(
      _ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?
    ) {
      onQueue(webSocketTask) { adapter, wire in wire.taskOpened(adapter) }
    }

    func urlSession(
      _ session: URLSession, webSocketTask: URLSessionWebSocketTask,
      didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?
    ) {
      onQueue(webSocketTask) { adapter, wire in wire.taskEnded(adapter) }
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      let id = ObjectIdentifier(task)
      onQueue(task) { [self] adapter, wire in
        adapter.completionError = error
        live[id] = nil
        wire.taskEnded(adapter)
      }
    }
  }

  /// `URLSessionWebSocketTask` as a `WebSocketTaskSeam`.
  final class URLSessionTaskAdapter: WebSocketTaskSeam, @unchecked Sendable {
    private let task: URLSessionWebSocketTask?
    private let queue: DispatchQueue
    /// How the task completed, if it did (for diagnostics).
    var completionError: (any Error)?
    var failure: (any Error)? { completionError }

    init(task: URLSessionWebSocketTask?, queue: DispatchQueue) {
      self.task = task
      self.queue = queue
    }

    /// A task of an invalidated session: every receive fails.
    static func dead(queue: DispatchQueue) -> URLSessionTaskAdapter { URLSessionTaskAdapter(task: nil, queue: queue) }

    func resume() { task?.resume() }

    func send(text: String) {
      task?.send(.string(text)) { _ in }  // a failed send also fails the pending receive
    }

    func receive(_ completion: @escaping (Result<URLSessionWebSocketTask.Message, any Error>) -> Void) {
      let deliver = UncheckedBox(completion)
      guard let task else {
        queue.async { deliver.value(.failure(URLError(.cancelled))) }
        return
      }
      task.receive { [queue] result in
        let result = UncheckedBox(result)
        queue.async { deliver.value(result.value) }
      }
    }

    func cancel(with closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) {
      task?.cancel(with: closeCode, reason: reason)
    }

    func cancel() { task?.cancel() }

    var closeCode: URLSessionWebSocketTask.CloseCode { task?.closeCode ?? .invalid }
    var closeReason: Data? { task?.closeReason }
  }

  /// `DispatchTime` and one `DispatchSourceTimer` on the transport's queue.
  final class DispatchClock: WireClock {
    private let queue: DispatchQueue
    private var timer: (any DispatchSourceTimer)?

    init(queue: DispatchQueue) { self.queue = queue }

    var nowMs: Int64 { Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000) }

    func arm(atMs: Int64?, _ fire: @escaping () -> Void) {
      timer?.cancel()
      timer = nil
      guard let atMs else { return }
      let source = DispatchSource.makeTimerSource(queue: queue)
      source.schedule(deadline: .now() + .milliseconds(Int(max(0, atMs - nowMs))))
      let handler = UncheckedBox(fire)
      source.setEventHandler { handler.value() }
      source.resume()
      timer = source
    }
  }
#endif
