// The Apple-platform transport: `URLSessionWebSocketTask`, compiled only where
// Foundation has it. It cannot be built on this project's Linux machine, so it is
// kept deliberately thin: every protocol rule lives in `ClientMachine`, shared with
// the Linux transport and tested there. Everything below runs on one serial queue.

#if canImport(Darwin)
  import Foundation
  import RelayClientCore

  /// The app-side handle: posts inputs onto the transport's serial queue.
  final class URLSessionTransport: TransportHandle, @unchecked Sendable {
    private let queue = DispatchQueue(label: "RelayClient.io")
    /// Set once on `queue`, read only there.
    private var wire: URLSessionWire?

    init(url: URL, makeRunner: @escaping @Sendable () -> ClientRunner) {
      queue.async { [self] in
        let runner = makeRunner()
        let wire = URLSessionWire(url: url, queue: queue, runner: runner)
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
  }

  /// One `URLSession` whose delegate callbacks run on the transport's queue; one
  /// `URLSessionWebSocketTask` per connection attempt.
  final class URLSessionWire: NSObject, WireTransport, URLSessionWebSocketDelegate, @unchecked Sendable {
    let runner: ClientRunner
    private let url: URL
    private let queue: DispatchQueue
    private var session: URLSession?
    private var task: URLSessionWebSocketTask?
    /// The current task completed its opening handshake.
    private var opened = false
    private var timer: (any DispatchSourceTimer)?

    init(url: URL, queue: DispatchQueue, runner: ClientRunner) {
      self.url = url
      self.queue = queue
      self.runner = runner
      super.init()
      let delegateQueue = OperationQueue()
      delegateQueue.underlyingQueue = queue
      delegateQueue.maxConcurrentOperationCount = 1
      session = URLSession(configuration: .default, delegate: self, delegateQueue: delegateQueue)
    }

    var nowMs: Int64 { Int64(DispatchTime.now().uptimeNanoseconds / 1_000_000) }

    func open() {
      guard let session else { return }
      let task = session.webSocketTask(with: url, protocols: ["relay.v1"])
      task.maximumMessageSize = 16 << 20
      self.task = task
      opened = false
      task.resume()
      receive(on: task)
    }

    private func receive(on task: URLSessionWebSocketTask) {
      task.receive { [weak self] result in
        guard let self else { return }
        self.queue.async {
          guard task === self.task else { return }
          switch result {
          case .success(.string(let text)):
            self.runner.transportText(Array(text.utf8))
            self.receive(on: task)
          case .success:
            self.receive(on: task)
          case .failure:
            self.ended(task)
          }
        }
      }
    }

    func urlSession(
      _ session: URLSession, webSocketTask: URLSessionWebSocketTask, didOpenWithProtocol protocol: String?
    ) {
      guard webSocketTask === task else { return }
      opened = true
      runner.transportOpened()
    }

    func urlSession(
      _ session: URLSession, webSocketTask: URLSessionWebSocketTask,
      didCloseWith closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?
    ) {
      ended(webSocketTask)
    }

    func urlSession(_ session: URLSession, task: URLSessionTask, didCompleteWithError error: (any Error)?) {
      guard let webSocketTask = task as? URLSessionWebSocketTask else { return }
      ended(webSocketTask)
    }

    /// Reports the end of the current task once. `CloseCode` cannot carry the
    /// application range (4000–4999, §2): such a code arrives as `.invalid`, like a
    /// socket that died without a close frame. On a socket that was upgraded but got
    /// no `welcome` it is taken as final (in practice 4501, a refused token, where
    /// retrying blindly would not help); otherwise as temporary, so the client
    /// reconnects and resumes.
    private func ended(_ ended: URLSessionWebSocketTask) {
      guard ended === task else { return }
      task = nil
      let reason = ended.closeReason.map { String(decoding: $0, as: UTF8.self) } ?? ""
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
      task?.send(.string(String(decoding: text, as: UTF8.self))) { _ in }
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
      // Reported through the delegate like any failed task.
      task?.cancel()
    }

    func armTimer(atMs: Int64?) {
      timer?.cancel()
      timer = nil
      guard let atMs else { return }
      let source = DispatchSource.makeTimerSource(queue: queue)
      source.schedule(deadline: .now() + .milliseconds(Int(max(0, atMs - nowMs))))
      source.setEventHandler { [weak self] in self?.runner.tick() }
      source.resume()
      timer = source
    }

    func shutdown() {
      timer?.cancel()
      timer = nil
      session?.invalidateAndCancel()
      session = nil
    }
  }
#endif
