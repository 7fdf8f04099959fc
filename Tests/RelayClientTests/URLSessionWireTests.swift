// The URLSession transport's own logic, with a scripted fake task and a manual
// clock in place of `URLSessionWebSocketTask` and Dispatch (the seam of
// URLSessionTransport.swift): what goes on the wire and how, the app-level
// pings that stand in for the WebSocket pings URLSession hides, how a task's
// end becomes a close code, and reconnecting with a new task. The rules
// themselves are ClientMachine's; this checks the wiring every iOS app runs.

import Foundation
import RelayProtocol
import Testing

#if canImport(FoundationNetworking)
  import FoundationNetworking
#endif

@testable import RelayClient
import RelayPrimitives

// MARK: - Fakes

/// One scripted `URLSessionWebSocketTask`.
final class FakeTask: WebSocketTaskSeam {
  var resumed = false
  /// Text messages sent, in order.
  var sent: [String] = []
  /// nil: not cancelled; `.some(nil)`: `cancel()`; `.some(code)`: `cancel(with:)`.
  var cancelled: URLSessionWebSocketTask.CloseCode??
  var closeCode: URLSessionWebSocketTask.CloseCode = .invalid
  var closeReason: Data?
  var failure: (any Error)?
  private var pending: ((Result<URLSessionWebSocketTask.Message, any Error>) -> Void)?
  var receiving: Bool { pending != nil }

  func resume() { resumed = true }
  func send(text: String) { sent.append(text) }
  func receive(_ completion: @escaping (Result<URLSessionWebSocketTask.Message, any Error>) -> Void) {
    precondition(pending == nil, "two receives pending on one task")
    pending = completion
  }
  func cancel(with closeCode: URLSessionWebSocketTask.CloseCode, reason: Data?) { cancelled = .some(closeCode) }
  func cancel() { cancelled = .some(nil) }

  /// The relay sends `message`: completes the pending receive.
  func deliver(_ message: URLSessionWebSocketTask.Message) {
    guard let completion = pending else { Issue.record("no receive pending"); return }
    pending = nil
    completion(.success(message))
  }
  func deliver(_ text: String) { deliver(.string(text)) }

  /// The pending receive fails (the socket died, or the task was cancelled).
  func failReceive() {
    let completion = pending
    pending = nil
    completion?(.failure(URLError(.networkConnectionLost)))
  }

  /// JSON objects of what was sent.
  var sentObjects: [JSONObject] { sent.compactMap { try? JSONParser.parse(Array($0.utf8)).objectValue } }
  var sentTypes: [String] { sentObjects.compactMap { $0["type"]?.stringValue } }
}

/// Makes `FakeTask`s and plays the session delegate's part.
final class FakeConnector: WebSocketConnector {
  var tasks: [FakeTask] = []
  var requests: [(url: URL, protocols: [String])] = []
  var invalidated = false
  weak var wire: URLSessionWire?

  func makeTask(url: URL, protocols: [String], for wire: URLSessionWire) -> any WebSocketTaskSeam {
    self.wire = wire
    requests.append((url, protocols))
    let task = FakeTask()
    tasks.append(task)
    return task
  }

  func invalidate() { invalidated = true }

  /// `urlSession(_:webSocketTask:didOpenWithProtocol:)`.
  func open(_ task: FakeTask) { wire?.taskOpened(task) }
  /// A close frame with `code` arrived: the delegate's `didCloseWith`, then the
  /// task's completion; the pending receive fails as URLSession's does.
  func close(_ task: FakeTask, code: URLSessionWebSocketTask.CloseCode, reason: String = "") {
    task.closeCode = code
    task.closeReason = Data(reason.utf8)
    wire?.taskEnded(task)
    task.failReceive()
    wire?.taskEnded(task)
  }
  /// The task failed without a close frame (`didCompleteWithError`).
  func fail(_ task: FakeTask) {
    task.failReceive()
    wire?.taskEnded(task)
  }
}

/// Time the test advances; the one timer fires on the way.
final class ManualClock: WireClock {
  var nowMs: Int64 = 1_000
  private(set) var deadline: Int64?
  private var fire: (() -> Void)?

  func arm(atMs: Int64?, _ fire: @escaping () -> Void) {
    deadline = atMs
    self.fire = atMs == nil ? nil : fire
  }

  func advance(_ ms: Int64) {
    let end = nowMs + ms
    var guardCount = 0
    while let due = deadline, due <= end, let fire, guardCount < 10_000 {
      nowMs = max(nowMs, due)
      deadline = nil
      self.fire = nil
      fire()
      guardCount += 1
    }
    nowMs = end
  }
}

/// What the runner hands to the app side.
final class Deliveries: @unchecked Sendable {
  private let lock = NSLock()
  private var batches: [DeliveryBatch] = []
  func append(_ batch: DeliveryBatch) { lock.withLock { batches.append(batch) } }
  var events: [ClientEvent] {
    lock.withLock { batches.flatMap { $0.effects.compactMap { if case .event(let e) = $0 { e } else { nil } } } }
  }
  var replies: [(UInt64, CommandReply)] {
    lock.withLock { batches.flatMap { $0.effects.compactMap { if case .reply(let id, let r) = $0 { (id, r) } else { nil } } } }
  }
  var state: ConnectionState { lock.withLock { batches.last?.snapshot.connectionState ?? .disconnected } }
}

/// A runner on a `URLSessionWire` over the fakes, driven synchronously.
final class WireHarness {
  let connector = FakeConnector()
  let clock = ManualClock()
  let out = Deliveries()
  let runner: ClientRunner
  let wire: URLSessionWire
  static let url = URL(string: "wss://relay.example.com/v1/ws")!

  init(auth: RelayAuth = .dev(uid: "alice", name: "Alice")) {
    var configuration = ClientConfiguration(auth: auth)
    configuration.sendsAppPings = true  // as RelayClient sets it for this transport
    configuration.backoffBaseMs = 100
    configuration.backoffCapMs = 1_000
    let out = self.out
    runner = ClientRunner(configuration: configuration, seed: 7) { out.append($0) }
    wire = URLSessionWire(url: Self.url, runner: runner, connector: connector, clock: clock)
    runner.wire = wire
  }

  var task: FakeTask { connector.tasks.last! }

  static func welcome(resumed: Bool = false, token: String = "rt-1") -> String {
    #"{"type":"welcome","re":"hello","connectionId":"c1","resumeToken":"\#(token)","user":{"uid":"alice","name":"Alice","role":"participant"},"heartbeat":{"interval":1000,"timeout":3000},"resumed":\#(resumed),"server":{"version":"1"}}"#
  }

  static func joined(_ session: String, seq: Int) -> String {
    let me = #"{"uid":"alice","name":"Alice","role":"participant","joinedAt":1,"status":"connected"}"#
    return #"{"type":"session.joined","session":"\#(session)","seq":\#(seq),"self":\#(me),"participants":[\#(me)],"hands":[]}"#
  }

  /// connect → the task opens → welcome.
  func connectAndWelcome(resumed: Bool = false, token: String = "rt-1") {
    runner.handle(.connect)
    connector.open(task)
    task.deliver(Self.welcome(resumed: resumed, token: token))
  }
}

// MARK: - Tests

@Suite struct URLSessionWireTests {
  @Test("one task per attempt: the URL, subprotocol relay.v1, resumed, receiving; hello as a text message")
  func openingAndHello() throws {
    let h = WireHarness(auth: .dev(uid: "alice", name: "Alice", role: "host"))
    h.runner.handle(.connect)
    #expect(h.connector.requests.count == 1)
    #expect(h.connector.requests[0].url == WireHarness.url)
    #expect(h.connector.requests[0].protocols == ["relay.v1"])
    #expect(h.task.resumed)
    #expect(h.task.receiving)
    #expect(h.task.sent.isEmpty)  // nothing before the opening handshake
    #expect(h.out.state == .connecting)

    h.connector.open(h.task)
    #expect(h.task.sent == [#"{"type":"hello","id":"hello","dev":{"uid":"alice","name":"Alice","role":"host"},"capabilities":["presence.diff"]}"#])
    h.task.deliver(WireHarness.welcome())
    #expect(h.out.state == .connected)
    #expect(h.task.receiving)  // re-armed after every message
  }

  @Test("commands are compact JSON text messages with ids; queued ones go after welcome")
  func commandFraming() throws {
    let h = WireHarness()
    h.runner.handle(.connect)
    h.runner.handle(.command(.joinSession("room"), requestID: 1))  // before welcome: queued
    h.connector.open(h.task)
    #expect(h.task.sentTypes == ["hello"])
    h.task.deliver(WireHarness.welcome())
    h.runner.handle(.command(.raiseHand(session: "room"), requestID: nil))
    h.runner.handle(.command(.sendMessage(session: "room", data: .string("hé \"quoted\"")), requestID: 2))
    h.runner.handle(.command(.initiateCall(to: ["bob"], callType: .video, metadata: nil), requestID: nil))
    h.runner.handle(.command(.rejectCall("call-1", reason: "busy"), requestID: nil))
    #expect(
      Array(h.task.sent.dropFirst()) == [
        #"{"type":"session.join","id":"c1","session":"room"}"#,
        #"{"type":"hand.raise","id":"c2","session":"room"}"#,
        #"{"type":"message.send","id":"c3","session":"room","data":"hé \"quoted\""}"#,
        #"{"type":"call.initiate","id":"c4","to":["bob"],"callType":"video"}"#,
        #"{"type":"call.reject","id":"c5","callId":"call-1","reason":"busy"}"#,
      ])
    // Replies: the join's once `session.joined` is applied, the message's at its `ok`.
    h.task.deliver(#"{"type":"ok","re":"c1"}"#)
    #expect(h.out.replies.isEmpty)
    h.task.deliver(WireHarness.joined("room", seq: 1))
    h.task.deliver(#"{"type":"ok","re":"c3"}"#)
    #expect(h.out.replies.map(\.0) == [1, 2])
    #expect(h.out.events.first == .sessionJoined(
      SessionState(id: "room", seq: 1, selfUID: "alice", participants: [Participant(uid: "alice", name: "Alice", joinedAt: 1)], hands: []),
      recovered: nil))
  }

  @Test("binary messages are not protocol but keep the connection alive; receive is re-armed")
  func binaryMessages() throws {
    let h = WireHarness()
    h.connectAndWelcome()
    h.clock.advance(2_500)  // an app ping at 1 000 and 2 000, nothing back
    h.task.deliver(.data(Data([1, 2, 3])))
    #expect(h.task.receiving)
    h.clock.advance(2_900)  // 5 400: 2 900 after the binary message, within the 3 000 timeout
    #expect(h.out.state == .connected)
    #expect(h.task.cancelled == nil)
  }

  @Test("pings: URLSession hides WebSocket pings, so {\"type\":\"ping\"} every heartbeat interval; silence drops the task")
  func appPings() throws {
    let h = WireHarness()
    h.connectAndWelcome()
    #expect(h.clock.deadline != nil)
    h.clock.advance(1_000)
    #expect(h.task.sentTypes == ["hello", "ping"])
    h.task.deliver(#"{"type":"pong"}"#)  // any text proves liveness
    h.clock.advance(1_000)
    #expect(h.task.sentTypes == ["hello", "ping", "ping"])
    h.clock.advance(1_999)  // 2 999 since the pong: still alive
    #expect(h.out.state == .connected)
    #expect(h.task.cancelled == nil)
    h.clock.advance(1)  // 3 000 of silence: the heartbeat timeout
    // Dropped without a close frame (`cancel()`), so the relay keeps the user for the resume.
    #expect(h.task.cancelled == .some(nil))
    #expect(h.out.state == .reconnecting)
    #expect(h.out.events.contains(.connectionLost))
  }

  @Test("reconnect: a new task after the backoff, hello with resume; the old task's late callbacks are ignored")
  func reconnectAndResume() throws {
    let h = WireHarness()
    h.connectAndWelcome(token: "rt-A")
    h.runner.handle(.command(.joinSession("room"), requestID: nil))
    h.task.deliver(WireHarness.joined("room", seq: 4))
    let first = h.task
    h.connector.fail(first)  // the network went away
    #expect(h.out.state == .reconnecting)
    #expect(h.connector.tasks.count == 1)
    let wait = try #require(h.clock.deadline) - h.clock.nowMs
    #expect(wait >= 0 && wait <= 100)  // full jitter over the base (attempt 0)
    h.clock.advance(wait)
    #expect(h.connector.tasks.count == 2)
    let second = h.task
    #expect(second !== first && second.resumed && second.receiving)

    // Late news from the dead task changes nothing.
    h.connector.open(first)
    first.closeCode = .goingAway
    h.wire.taskEnded(first)
    #expect(second.sent.isEmpty)
    #expect(h.out.state == .reconnecting)

    h.connector.open(second)
    let hello = try #require(second.sentObjects.first)
    #expect(hello["type"]?.stringValue == "hello")
    let resume = try #require(hello["resume"]?.objectValue)
    #expect(resume["token"]?.stringValue == "rt-A")
    #expect(resume["sessions"]?.objectValue?["room"]?.numberValue?.text == "4")
    second.deliver(WireHarness.welcome(resumed: true, token: "rt-B"))
    #expect(h.out.state == .connected)
    #expect(h.out.events.suffix(1) == [.connectionRestored])
  }

  @Test(
    "close codes: 1000 stops; 1001, 1011 and 1006 reconnect",
    arguments: [
      (URLSessionWebSocketTask.CloseCode.normalClosure, ConnectionState.closed),
      (.goingAway, .reconnecting),
      (.internalServerError, .reconnecting),
      (.abnormalClosure, .reconnecting),
    ])
  func closeCodesAfterWelcome(code: URLSessionWebSocketTask.CloseCode, expected: ConnectionState) throws {
    let h = WireHarness()
    h.connectAndWelcome()
    h.connector.close(h.task, code: code, reason: "bye")
    #expect(h.out.state == expected)
    if expected == .closed {
      #expect(h.out.events.last == .connectionClosed(code: UInt16(code.rawValue), reason: "bye"))
      #expect(h.clock.deadline == nil)  // no reconnect pending
    } else {
      #expect(h.out.events.last == .connectionLost)
      h.clock.advance(1_000)
      #expect(h.connector.tasks.count == 2)
    }
  }

  @Test("an application close code (4000-4999) reaches URLSession as .invalid: final before welcome, temporary after")
  func applicationCloseCodes() throws {
    // 4501 (bad token) closes an upgraded socket before welcome: taken as final.
    let refused = WireHarness(auth: .token("expired"))
    refused.runner.handle(.connect)
    refused.connector.open(refused.task)
    refused.connector.close(refused.task, code: .invalid, reason: "unauthorized")
    #expect(refused.out.state == .closed)
    #expect(refused.out.events.last == .connectionClosed(code: 4500, reason: "unauthorized"))
    refused.clock.advance(60_000)
    #expect(refused.connector.tasks.count == 1)  // no blind retry with the same token

    // After welcome, the same is a drop (4000-4499 temporary, or a dead socket): resume.
    let h = WireHarness()
    h.connectAndWelcome()
    h.connector.close(h.task, code: .invalid)
    #expect(h.out.state == .reconnecting)

    // A task that never opened (connection refused) is a drop too, with backoff.
    let refusedTCP = WireHarness()
    refusedTCP.runner.handle(.connect)
    refusedTCP.connector.fail(refusedTCP.task)
    #expect(refusedTCP.out.state == .connecting)
    refusedTCP.clock.advance(100)
    #expect(refusedTCP.connector.tasks.count == 2)
  }

  @Test("disconnect sends close 1000 through cancel(with:); shutdown stops the timer and invalidates the session")
  func disconnectAndShutdown() throws {
    let h = WireHarness()
    h.connectAndWelcome()
    let task = h.task
    h.runner.handle(.disconnect)
    #expect(task.cancelled == .some(.normalClosure))
    #expect(h.out.state == .disconnected)
    #expect(h.out.events.last == .connectionClosed(code: 1000, reason: "disconnect"))
    // The cancelled task's own end is not reported again.
    h.connector.close(task, code: .normalClosure)
    #expect(h.out.events.filter { if case .connectionClosed = $0 { true } else { false } }.count == 1)
    h.wire.shutdown()
    #expect(h.connector.invalidated)
    #expect(h.clock.deadline == nil)
  }

  @Test("dropConnection (tests, and a network failure) cancels the task without a close frame and resumes")
  func dropConnection() throws {
    let h = WireHarness()
    h.connectAndWelcome()
    let task = h.task
    h.runner.handle(.dropConnection)
    #expect(task.cancelled == .some(nil))
    h.connector.fail(task)  // URLSession reports the cancelled task as failed
    #expect(h.out.state == .reconnecting)
    h.clock.advance(1_000)
    #expect(h.connector.tasks.count == 2)
  }
}
