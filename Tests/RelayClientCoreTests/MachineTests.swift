// The client machine with injected time and seed: no sockets, no sleeps.

@testable import RelayClientCore
import RelayProtocol
import Testing

@Suite struct ConnectionTests {
  @Test("connect opens a transport, sends hello with the dev identity, welcome connects")
  func helloAndWelcome() {
    var h = Harness(auth: .dev(uid: "bob", name: "Bob", role: "host"))
    #expect(h.run { m, now in m.connect(nowMs: now) } == [.openTransport])
    #expect(h.machine.connectionState == .connecting)
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["type"]?.stringValue == "hello")
    #expect(hello?["dev"]?["uid"]?.stringValue == "bob")
    #expect(hello?["dev"]?["role"]?.stringValue == "host")
    #expect(hello?["resume"] == nil)
    h.server(h.welcome(resumed: false))
    #expect(h.machine.connectionState == .connected)
    #expect(h.machine.snapshot.user?.uid == "bob")
  }

  @Test("token auth sends hello.token")
  func tokenHello() {
    var h = Harness(auth: .token("jwt.x.y"))
    h.run { m, now in m.connect(nowMs: now) }
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["token"]?.stringValue == "jwt.x.y")
    #expect(hello?["dev"] == nil)
  }

  @Test("full-jitter backoff stays within [0, min(20 s, 0.5 s · 2ⁿ)] and reaches the cap")
  func backoffBounds() {
    for seed in UInt64(1)...200 {
      var h = Harness(seed: seed)
      for attempt in 0..<12 {
        h.machine.attempt = attempt
        let delay = h.machine.nextBackoffMs()
        #expect(delay >= 0 && delay <= min(20_000, 500 << Int64(attempt)))
      }
    }
    var h = Harness(seed: 3)
    h.machine.attempt = 10
    let delays = (0..<500).map { _ in h.machine.nextBackoffMs() }
    #expect(delays.max()! > 18_000)
    #expect(delays.min()! < 2_000)
  }

  @Test("retry close codes reconnect after backoff and resume", arguments: [nil, 1001, 1006, 1011, 1012, 4000, 4008, 4029] as [UInt16?])
  func reconnectingCodes(code: UInt16?) {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("room", seq: 3, members: ["alice", "bob"]))
    let closed = h.run { m, now in m.transportClosed(code: code, reason: "", nowMs: now) }
    #expect(closed.events == [.connectionLost])
    #expect(h.machine.connectionState == .reconnecting)
    let wait = h.machine.reconnectAtMs! - h.now
    #expect(wait >= 0 && wait <= 500)
    #expect(h.advance(500).opens == 1)
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["resume"]?["token"]?.stringValue == "rt-1")
    #expect(hello?["resume"]?["sessions"]?["room"]?.numberValue?.int64 == 3)
    #expect(h.server(h.welcome(resumed: true, token: "rt-2")).events == [.connectionRestored])
    #expect(h.machine.connectionState == .connected)
  }

  @Test("1000 and 4500–4999 close for good: no retry, ever", arguments: [1000, 4500, 4501, 4509, 4999] as [UInt16])
  func finalCodes(code: UInt16) {
    var h = Harness()
    h.connectAndWelcome()
    let closed = h.run { m, now in m.transportClosed(code: code, reason: "bye", nowMs: now) }
    #expect(closed.events == [.connectionClosed(code: code, reason: "bye")])
    #expect(h.machine.connectionState == .closed)
    #expect(h.machine.nextDeadlineMs == nil)
    #expect(h.advance(600_000).opens == 0)
    let refused = h.run { m, now in m.command(.joinSession("room"), requestID: 9, nowMs: now) }
    #expect(refused == [.reply(requestID: 9, .failure(.notConnected))])
  }

  @Test("failed attempts back off exponentially until one succeeds; the counter then resets")
  func attemptsGrow() {
    var h = Harness()
    h.run { m, now in m.connect(nowMs: now) }
    for n in 0..<6 {
      h.run { m, now in m.transportClosed(code: nil, reason: "refused", nowMs: now) }
      #expect(h.machine.connectionState == .connecting)
      let wait = h.machine.reconnectAtMs! - h.now
      #expect(wait <= min(20_000, 500 << Int64(n)))
      #expect(h.advance(wait).opens == 1)
    }
    h.run { m, now in m.transportOpened(nowMs: now) }
    h.server(h.welcome(resumed: false))
    #expect(h.machine.attempt == 0)
  }

  @Test("an attempt without welcome in time is abandoned and retried")
  func connectTimeout() {
    var h = Harness()
    h.run { m, now in m.connect(nowMs: now) }
    h.run { m, now in m.transportOpened(nowMs: now) }
    let effects = h.advance(10_000)
    #expect(effects.contains(.closeTransport(code: nil)))
    #expect(h.machine.reconnectAtMs != nil)
  }

  @Test("silence past heartbeat.timeout drops the socket without a close frame (§5) and reconnects")
  func silence() {
    var h = Harness()
    h.connectAndWelcome()
    h.advance(2_000)
    h.run { m, now in m.transportActivity(nowMs: now); return [] }  // a ping
    #expect(h.advance(2_999).isEmpty)
    let effects = h.advance(1)
    #expect(effects.first == .closeTransport(code: nil))
    #expect(effects.events == [.connectionLost])
  }

  @Test("app-level pings every heartbeat interval when the transport hides pings")
  func appPings() {
    var h = Harness(appPings: true)
    h.connectAndWelcome()
    #expect(h.advance(1_000).sentTypes == ["ping"])
    h.server(#"{"type":"pong"}"#)
    #expect(h.advance(1_000).sentTypes == ["ping"])
  }

  @Test("commands wait while reconnecting; pending ones fail connectionLost; background is re-sent")
  func queueing() {
    var h = Harness()
    h.connectAndWelcome()
    #expect(h.run { m, now in m.setBackground(true, nowMs: now) }.sentTypes == ["client.background"])
    let raise = h.run { m, now in m.command(.raiseHand(session: "room"), requestID: 1, nowMs: now) }
    #expect(raise.sentTypes == ["hand.raise"])
    let dropped = h.run { m, now in m.transportClosed(code: 1006, reason: "", nowMs: now) }
    #expect(dropped.contains(.reply(requestID: 1, .failure(.connectionLost))))
    #expect(h.run { m, now in m.command(.leaveSession("room"), requestID: 2, nowMs: now) }.isEmpty)
    h.advance(1_000)
    h.run { m, now in m.transportOpened(nowMs: now) }
    let after = h.server(h.welcome(resumed: true))
    #expect(after.sentTypes == ["client.background", "session.leave"])
  }

  @Test("disconnect closes with 1000, fails what waits, and stops")
  func disconnect() {
    var h = Harness()
    h.connectAndWelcome()
    h.run { m, now in m.command(.raiseHand(session: "room"), requestID: 4, nowMs: now) }
    let effects = h.run { m, now in m.disconnect(nowMs: now) }
    #expect(effects.first == .closeTransport(code: 1000))
    #expect(effects.contains(.reply(requestID: 4, .failure(.notConnected))))
    #expect(h.machine.connectionState == .disconnected)
    #expect(h.machine.nextDeadlineMs == nil)
  }
}
