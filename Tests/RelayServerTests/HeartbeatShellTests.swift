// protocol/ §5 heartbeats in the shell (RelayServer+Heartbeats.swift), through the real
// connection pipeline on in-memory transports: the server pings its relay sockets,
// drops a silent one without a close handshake, and the core hears of it as an
// ordinary unclean close (its members see `participant.lost`).
import EventLoop
import RelayCore
import RelayPrimitives
import Testing

@testable import RelayServer

@Suite struct HeartbeatShellTests {
  /// Interval 1 000 ms, timeout 3 000 ms: checks on a 100 ms quantum.
  static func short(_ config: inout ServerConfig) {
    config.core.heartbeatIntervalMs = 1_000
    config.core.heartbeatTimeoutMs = 3_000
  }

  @Test("a relay socket is pinged at the interval; an echo socket is not the relay's to ping")
  func pingsRelaySockets() throws {
    try withServer(Self.short) { net in
      let server = net.server
      let start = Int64(server.loop.nowMs)
      let relay = Peer(net)
      relay.upgrade()
      let echo = Peer(net)
      echo.upgrade(path: "/v1/echo", protocols: [])
      #expect(server.heartbeats.openCount == 1)
      #expect(server.heartbeats.nextDeadlineMs.map { $0 <= start + 1_100 } == true)
      server.heartbeatsDue(nowMs: start + 1_100)
      net.endTurn()
      #expect(relay.events().contains { if case .ping = $0 { return true } else { return false } })
      #expect(echo.events().isEmpty)
    }
  }

  @Test("a silent socket is dropped without a close frame and its participant is lost to the others")
  func silentSocketIsDroppedAndLost() throws {
    try withServer(Self.short) { net in
      let server = net.server
      let start = Int64(server.loop.nowMs)
      let alice = Peer(net)
      alice.upgrade()
      _ = alice.hello("alice")
      alice.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      let bob = Peer(net)
      bob.upgrade()
      _ = bob.hello("bob")
      bob.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      _ = alice.texts()
      _ = bob.texts()
      // Nothing arrives from anyone (the loop's clock stands still in this test).
      server.heartbeatsDue(nowMs: start + 2_900)
      #expect(bob.transport.state == .open)
      server.heartbeatsDue(nowMs: start + 3_100)
      #expect(bob.transport.state == .closed && alice.transport.state == .closed)
      #expect(!bob.transport.closedGracefully)  // dropped: no close handshake
      bob.transport.runPendingClose()
      #expect(server.heartbeats.openCount == 1)
      // The core took it as an unclean close: bob is held, lost, for grace.
      let carol = Peer(net)
      carol.upgrade()
      _ = carol.hello("carol")
      carol.send(#"{"type":"session.join","id":"j","session":"r"}"#)
      let joined = carol.texts().first { $0.contains(#""type":"session.joined""#) } ?? ""
      #expect(joined.contains(#""uid":"bob""#) && joined.contains(#""status":"lost""#))
    }
  }

  @Test("a socket we are closing is left to its close deadline, not dropped as lost")
  func closingSocketIsNotDropped() throws {
    try withServer(Self.short) { net in
      let server = net.server
      let start = Int64(server.loop.nowMs)
      let peer = Peer(net)
      peer.upgrade()
      peer.conn.close(code: 1001, reason: "going away")
      server.heartbeatsDue(nowMs: start + 10_000)
      guard case .closing = peer.conn.state else { Issue.record("state \(peer.conn.state)"); return }
      #expect(peer.transport.state == .open)
    }
  }
}
