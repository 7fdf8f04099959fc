// The inputs for a shell that times its own reconnects and applies some session
// events itself (ClientMachine+Shell.swift), on the pure machine.

@testable import RelayClientCore
import RelayProtocol
import Testing

@Suite struct ShellInputTests {
  @Test("reconnectNow opens at once instead of waiting out the backoff; no-op while a transport is active")
  func reconnectNow() {
    var h = Harness()
    h.connectAndWelcome()
    #expect(h.run { m, now in m.reconnectNow(nowMs: now) }.isEmpty)
    h.run { m, now in m.transportClosed(code: nil, reason: "dropped", nowMs: now) }
    let due = h.machine.reconnectAtMs
    #expect(due != nil)
    let effects = h.run { m, now in m.reconnectNow(nowMs: now) }
    #expect(effects == [.openTransport])
    #expect(h.machine.reconnectAtMs == nil)
    #expect(h.run { m, now in m.reconnectNow(nowMs: now) }.isEmpty)
  }

  @Test("sessionEventsApplied moves the resume position of a held session only")
  func sessionEventsApplied() {
    var h = Harness()
    h.connectAndWelcome()
    h.server(Harness.joined("room", seq: 3, members: ["alice", "bob"]))
    h.machine.sessionEventsApplied(session: "room", through: 41)
    h.machine.sessionEventsApplied(session: "elsewhere", through: 9)
    #expect(h.machine.snapshot.sessions["elsewhere"] == nil)
    h.run { m, now in m.transportClosed(code: 1001, reason: "", nowMs: now) }
    h.run { m, now in m.reconnectNow(nowMs: now) }
    let hello = h.run { m, now in m.transportOpened(nowMs: now) }.first?.sent
    #expect(hello?["resume"]?["token"]?.stringValue == h.machine.currentResumeToken)
    #expect(hello?["resume"]?["sessions"]?["room"]?.numberValue?.int64 == 41)
  }

  @Test("received(message:) answers as received(text:) does")
  func parsedMessage() throws {
    var a = Harness()
    var b = Harness()
    a.connectAndWelcome()
    b.connectAndWelcome()
    let ra = a.run { m, now in m.command(.joinSession("room"), requestID: 5, nowMs: now) }
    b.run { m, now in m.command(.joinSession("room"), requestID: 5, nowMs: now) }
    let id = try #require(ra.first?.sent?["id"]?.stringValue)
    let ok = #"{"type":"ok","re":"\#(id)"}"#
    let joined = Harness.joined("room", seq: 3, members: ["alice", "bob"])
    let viaText = a.server(ok) + a.server(joined)
    let viaObject = [ok, joined].flatMap { json in
      b.run { m, now in m.received(message: try! JSONParser.parse(json).objectValue!, nowMs: now) }
    }
    #expect(viaText == viaObject)
    #expect(viaObject.contains { if case .reply(5, .success) = $0 { true } else { false } })
  }
}
