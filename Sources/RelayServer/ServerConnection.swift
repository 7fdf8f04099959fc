import EventLoop
import RelayCore
import RelayWebSocket

/// Which WebSocket endpoint a connection was upgraded on.
enum Endpoint {
  /// `/v1/ws`: relay protocol, every text message goes to the core.
  case relay
  /// `/v1/echo`: plain echo for conformance suites (contract §1).
  case echo
}

/// Where one TCP connection is in its life: reading an HTTP head (and maybe a
/// body), speaking WebSocket, or on its way out.
enum Phase {
  case http(HTTPHeadParser)
  case body(HTTPRequestHead, [UInt8], expected: Int)
  case websocket(WebSocketConnection, Endpoint)
  /// A response or close frame is queued; only the close of the socket is awaited.
  case finishing
}

/// Per-connection state owned by the server. The core knows the connection only by
/// its `ConnectionID`; this object owns the socket and the protocol codec.
final class ServerConnection {
  let id: ConnectionID
  let tcp: TCPConnection
  var phase: Phase
  /// True once the core was told about this connection (`RelayCore.open`), so it
  /// is told about its end exactly once.
  var coreOpened = false
  /// True when the WebSocket closing handshake completed or we started it: the
  /// core then treats the end as a clean close, not a lost connection.
  var closedCleanly = false
  /// Counted among the server's open WebSockets (see `RelayServer.leaveWebSocket`).
  var countedAsWebSocket = false

  init(id: ConnectionID, tcp: TCPConnection, maxHeadBytes: Int) {
    self.id = id
    self.tcp = tcp
    self.phase = .http(HTTPHeadParser(maxHeadBytes: maxHeadBytes))
  }

  var isWebSocket: Bool {
    if case .websocket = phase { return true }
    return false
  }
}
