import RelayCluster
import RelayCore
import RelayProtocol
import RelayPrimitives
import EventLoop

/// Clustered inputs (docs/cluster.md): each is appended to the shared log and takes
/// effect when this node's replica reads it back, like every node's. Sockets'
/// liveness stays with this node's shell (its heartbeats, RelayServer+Cluster.swift).
extension ClusterNode: InputLog {
  var takesBorrowedText: Bool { false }
  var acceptsInputs: Bool { isReady }

  /// The node's number is in the top bits, so ids are unique across nodes.
  func connectionID(local: UInt64) -> ConnectionID { Replica.connectionID(node: number, local: local) }

  func open(_ conn: ServerConnection) {
    server.clusterLastInbound[conn.id.raw] = server.loop.nowMs
    append(.open(connection: conn.id.raw)) { [weak conn] in
      conn?.close(code: CloseCode.serviceRestart, reason: "cluster unavailable")
    }
  }

  func text(_ conn: ServerConnection, _ payload: [UInt8]) {
    server.clusterLastInbound[conn.id.raw] = server.loop.nowMs
    append(.text(connection: conn.id.raw, payload)) { [weak self, weak conn] in
      guard let self, let conn else { return }
      self.server.answerUnavailable(conn, payload)
    }
  }

  func alive(_ conn: ServerConnection) {
    server.clusterLastInbound[conn.id.raw] = server.loop.nowMs
  }

  func closed(_ conn: ServerConnection, clean: Bool) {
    server.clusterLastInbound[conn.id.raw] = nil
    // §13: a drained node's clients resume elsewhere, so their participants are
    // held (lost), not gone. A socket of an earlier node number is already closed
    // on every replica.
    guard Replica.node(of: conn.id.raw) == number else { return }
    append(.closed(connection: conn.id.raw, clean: clean && !server.draining))
  }

  /// Answered when the record is applied, so every node agrees on the outcome.
  func admin(_ conn: ServerConnection?, _ action: AdminAction) {
    let request = server.nextAdminRequest
    server.nextAdminRequest += 1
    if let conn { server.pendingAdmin[request] = conn }
    append(.admin(request: request, action)) { [weak self] in
      guard let server = self?.server, let conn = server.pendingAdmin.removeValue(forKey: request) else { return }
      server.respondError(conn, 503, ErrorCode.unavailable.rawValue, "shared state unreachable; retry")
    }
  }
}
