// RelayClient against the real relay: token auth, final close codes, and the
// resume after a killed socket with nothing lost and nothing duplicated (§8).

import Foundation
import Synchronization
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@testable import RelayClient

@Suite(.serialized) struct ConnectionLiveTests {
  @Test("token auth connects; a bad token is closed 4501 and not retried")
  func tokenAuth() async throws {
    let relay = try RelayProcess(["--secret", "s3cret"])
    let token = try RelayProcess.token(secret: "s3cret", sub: "alice", name: "Alice", role: "host")
    // A host name, resolved by the transport.
    let alice = RelayClient(url: URL(string: "ws://localhost:\(relay.port)/v1/ws")!, auth: .token(token))
    try await alice.connect()
    #expect(alice.state.user == CallUser(uid: "alice", name: "Alice"))
    try await alice.joinSession(sessionID: "room")

    let (mallory, rm) = makeClient(relay, .token("not-a-jwt"))
    do {
      try await mallory.connect()
      Issue.record("a bad token connected")
    } catch { #expect(error == .closed(code: 4501)) }
    #expect(rm.all == ["connectionClosed 4501"])
    #expect(mallory.connectionState == .closed)
    // §14: 4501 means "get a new token", after which connecting works.
    let fresh = try RelayProcess.token(secret: "s3cret", sub: "mallory", name: "Mallory")
    mallory.updateAuth(.token(fresh))
    try await mallory.connect()
    #expect(mallory.state.user?.uid == "mallory")
    mallory.disconnect()
    await rm.wait(for: "connectionClosed 1000")
    // Commands after a final close or a disconnect fail at once instead of queueing.
    do {
      try await mallory.joinSession(sessionID: "room")
      Issue.record("joined while disconnected")
    } catch { #expect(error == .notConnected) }

    // Dev identities are refused when the relay has a secret.
    let (devClient, _) = makeClient(relay, dev("eve"))
    do {
      try await devClient.connect()
      Issue.record("dev hello accepted by a relay with a secret")
    } catch { #expect(error == .closed(code: 4501)) }
    relay.stop()
  }

  @Test("a killed socket: lost, reconnect, resume; every message once and in seq order")
  func resumeAfterKill() async throws {
    let relay = try RelayProcess(["--grace", "10000", "--message-rate", "1000", "--heartbeat-interval", "500", "--heartbeat-timeout", "2000"])
    let (alice, ra) = makeClient(relay, dev("alice"))
    let (bob, rb) = makeClient(relay, dev("bob"))
    try await alice.connect()
    try await bob.connect()
    try await alice.joinSession(sessionID: "room")
    try await bob.joinSession(sessionID: "room")
    try await bob.raiseHand(sessionID: "room")
    for n in 1...5 { post(alice, n) }
    await rb.wait(10, "first messages") { $0.filter { $0.hasPrefix("message room") }.count == 5 }

    bob.dropConnectionForTesting()
    await rb.wait(for: "connectionLost")
    for n in 6...30 { post(alice, n) }
    await rb.wait(for: "connectionRestored")
    await rb.wait(10, "all messages") { $0.filter { $0.hasPrefix("message room") }.count >= 30 }
    await ra.wait(for: "participantRestored room bob")
    #expect(ra.all.contains("participantLost room bob"))

    let lines = rb.all.filter { $0.hasPrefix("message room alice") }
    #expect(lines == (1...30).map { "message room alice \($0)" })
    // Strictly increasing: no duplicate from the replay (the gaps are bob's own
    // participant.lost / participant.restored, replayed to him too, §8).
    let seqs = rb.seqs
    #expect(zip(seqs, seqs.dropFirst()).allSatisfy { $0 < $1 })
    #expect(bob.connectionState == .connected)
    await rb.wait(10, "same seq") { _ in
      bob.state.sessions["room"]?.seq == alice.state.sessions["room"]?.seq
    }
    #expect(bob.state.raisedHands(in: "room").map(\.uid) == ["bob"])
    relay.stop()
  }

  @Test("callbacks and replies run on the queue the app chose, never on the I/O thread")
  func callbackQueue() async throws {
    let relay = try RelayProcess([])
    let key = DispatchSpecificKey<String>()
    let queue = DispatchQueue(label: "app.callbacks")
    queue.setSpecific(key: key, value: "app")
    let client = RelayClient(url: relay.url, auth: dev("alice"), callbackQueue: queue)
    let probe = QueueProbe(key: key)
    client.addSessionStatusListener(id: "p", probe)
    client.addParticipantEventListener(id: "p", probe)
    try await client.connect()
    try await client.joinSession(sessionID: "room")
    try await client.raiseHand(sessionID: "room")
    await probe.recorder.wait(for: "handRaised room alice")
    #expect(probe.offQueue.withLock { $0 } == 0)
    client.removeParticipantEventListener(id: "p")
    try await client.lowerHand(sessionID: "room")
    try await client.sendMessage(.string("after removal"), sessionID: "room")
    await probe.recorder.wait(10, "no more participant events") { _ in
      client.state.raisedHands(in: "room").isEmpty
    }
    #expect(!probe.recorder.all.contains { $0.hasPrefix("message") })
    relay.stop()
  }

  @Test("reconnect attempts against a dead endpoint stay within the full-jitter bounds")
  func backoffBoundsLive() async throws {
    let endpoint = try RefusingEndpoint()
    var options = RelayClientOptions()
    options.backoffBaseMs = 200
    options.backoffCapMs = 1_000
    let client = RelayClient(
      url: URL(string: "ws://127.0.0.1:\(endpoint.port)/v1/ws")!, auth: dev("alice"), options: options)
    startConnecting(client)
    let attempts = 7
    #expect(endpoint.waitForAccepts(attempts, seconds: 20))
    let times = endpoint.acceptTimes
    #expect(client.connectionState == .connecting)
    client.disconnect()
    endpoint.stop()
    // Attempt n+1 follows attempt n after random(0, min(cap, base · 2ⁿ)); 250 ms of
    // slack for scheduling on a loaded machine.
    for n in 0..<(attempts - 1) {
      let gapMs = (times[n + 1] - times[n]) * 1_000
      let bound = Double(min(1_000, 200 << n))
      #expect(gapMs <= bound + 250, "gap \(n) was \(Int(gapMs)) ms, bound \(Int(bound)) ms")
    }
  }

  @Test("a relay restart: reconnect with backoff, resumed false, sessions re-joined")
  func relayRestart() async throws {
    var relay = try RelayProcess([])
    let port = relay.port
    let (bob, rb) = makeClient(relay, dev("bob"))
    try await bob.connect()
    try await bob.joinSession(sessionID: "room")
    relay.stop()
    await rb.wait(for: "connectionLost")
    #expect(bob.connectionState == .reconnecting)
    relay = try RelayProcess([], port: port)
    await rb.wait(30, "restored") { $0.contains("connectionRestored") }
    await rb.wait(10, "re-joined") { $0.filter { $0 == "sessionJoined room" }.count == 2 }
    #expect(bob.state.participants(in: "room").map(\.uid) == ["bob"])
    relay.stop()
  }
}

/// The fire-and-forget `sendMessage` (a sync context picks the sync overload).
private func post(_ client: RelayClient, _ n: Int) {
  client.sendMessage(.object(JSONObject([("n", .number(JSONNumber(n)))])), sessionID: "room")
}

/// Records callbacks and counts those that ran off the expected queue.
private final class QueueProbe: SessionStatusListener, ParticipantEventListener, @unchecked Sendable {
  let key: DispatchSpecificKey<String>
  let recorder = Recorder()
  let offQueue = Mutex(0)
  init(key: DispatchSpecificKey<String>) { self.key = key }
  private func check(_ line: String) {
    if DispatchQueue.getSpecific(key: key) != "app" || Thread.current.name == "RelayClient I/O" {
      offQueue.withLock { $0 += 1 }
    }
    recorder.record(line)
  }
  func onSessionJoined(_ session: SessionState) { check("sessionJoined \(session.id)") }
  func onParticipantHandRaised(_ hand: RaisedHand, sessionID: String) { check("handRaised \(sessionID) \(hand.uid)") }
  func onMessageReceived(_ m: RelayMessage, sessionID: String) { check("message") }
}

/// A loopback port that accepts TCP connections and closes them at once, recording
/// when each arrived: every WebSocket attempt fails as a dead relay would.
private final class RefusingEndpoint: @unchecked Sendable {
  let port: Int
  private let fd: Int32
  private let condition = NSCondition()
  private var times: [Double] = []

  init() throws {
    let sock = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    let bound = withUnsafeMutablePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(sock, $0, len) == 0 && getsockname(sock, $0, &len) == 0 }
    }
    guard bound, listen(sock, 16) == 0 else {
      close(sock)
      throw RelayTestError("cannot listen")
    }
    fd = sock
    port = Int(UInt16(bigEndian: addr.sin_port))
    let thread = Thread { [self] in self.acceptLoop() }
    thread.start()
  }

  /// Unblocks `accept`; the accept thread then closes the socket and ends.
  func stop() { shutdown(fd, Int32(SHUT_RDWR)) }

  private func acceptLoop() {
    while true {
      let client = accept(fd, nil, nil)
      guard client >= 0 else {
        close(fd)
        return
      }
      close(client)
      condition.withLock {
        times.append(Date().timeIntervalSince1970)
        condition.broadcast()
      }
    }
  }

  var acceptTimes: [Double] { condition.withLock { times } }

  func waitForAccepts(_ count: Int, seconds: Double) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    condition.lock()
    defer { condition.unlock() }
    while times.count < count { if !condition.wait(until: deadline) { break } }
    return times.count >= count
  }
}

/// The non-waiting `connect()` (a sync context picks the sync overload).
private func startConnecting(_ client: RelayClient) { client.connect() }
