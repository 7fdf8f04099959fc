import EventLoop
import RelayCrypto
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
/// body), speaking WebSocket, or on its way out. The HTTP states are boxed
/// (`indirect`): they are large and brief, and an upgraded connection should not
/// carry their size for the rest of its life.
enum Phase {
  indirect case http(HTTPHeadParser)
  indirect case body(HTTPRequestHead, [UInt8], expected: Int)
  case websocket(Endpoint)
  /// A response or close frame is queued; only the close of the socket is awaited.
  case finishing
}

/// Per-connection state owned by the server. The core knows the connection only by
/// its `ConnectionID`; this object owns the socket and the protocol codec, and is
/// the socket's delegate, so a read reaches it without a table lookup or a closure
/// context per connection.
final class ServerConnection: TCPConnectionDelegate {
  // Layout matters here (one per connection): 136 bytes fill a 144-byte malloc chunk.
  unowned let server: RelayServer
  let id: ConnectionID
  let tcp: TCPConnection
  var phase: Phase
  /// The WebSocket codec, used once `phase` is `.websocket`. Held inline and
  /// mutated in place: moving it in and out of `phase` copied it on every read.
  var ws: WebSocketConnection
  /// True once the core was told about this connection (`RelayCore.open`), so it
  /// is told about its end exactly once.
  var coreOpened = false
  /// True when the WebSocket closing handshake completed or we started it: the
  /// core then treats the end as a clean close, not a lost connection.
  var closedCleanly = false
  /// Counted among the server's open WebSockets (see `RelayServer.leaveWebSocket`).
  var countedAsWebSocket = false

  init(server: RelayServer, id: ConnectionID, tcp: TCPConnection, maxHeadBytes: Int, maxMessageBytes: Int) {
    self.server = server
    self.id = id
    self.tcp = tcp
    self.phase = .http(HTTPHeadParser(maxHeadBytes: maxHeadBytes))
    self.ws = WebSocketConnection(role: .server, maxMessageBytes: maxMessageBytes)
  }

  var isWebSocket: Bool {
    if case .websocket = phase { return true }
    return false
  }

  /// A WebSocket that may still get data and pings: not after our close frame
  /// (RFC 6455 §5.5.1).
  var acceptsFrames: Bool { isWebSocket && ws.state == .open }

  func connection(_ connection: TCPConnection, didRead bytes: UnsafeMutableRawBufferPointer) {
    if let tls = connection.sealer as? TLSConnection { return server.didReadTLS(self, tls, bytes) }
    server.didRead(self, bytes)
  }

  func connection(_ connection: TCPConnection, didCloseWith reason: CloseReason) {
    server.didClose(self, reason)
  }
}

/// The server's connections by id (fan-out resolves every recipient here): the core's
/// reference table with the cheap hash for server-assigned ids.
enum ServerConnectionsById: TableKeying {
  static func key(of element: ServerConnection) -> ConnectionID { element.id }
  static func hash(_ key: ConnectionID) -> UInt64 { key.tableHash }
}
