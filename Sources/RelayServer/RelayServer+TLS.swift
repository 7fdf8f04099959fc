import EventLoop
import Logging
import RelayCore
import RelayCrypto
import RelayPrimitives

/// TLS on the listener (protocol/ §1, `--tls-cert`/`--tls-key`).
extension RelayServer {
  /// Loads the certificate chain and key named by the config; throws on a bad pair.
  func loadTLS() throws {
    guard let cert = config.tlsCertFile, let key = config.tlsKeyFile else { return }
    tlsContext = try TLSContext(certificateChain: cert, privateKey: key)
  }

  /// SIGHUP: a new pair for new connections; a bad one is refused and the old one
  /// stays in force. Connections already up keep the pair they started with.
  func reloadTLS() {
    guard let cert = config.tlsCertFile, let key = config.tlsKeyFile else { return }
    do {
      tlsContext = try TLSContext(certificateChain: cert, privateKey: key)
      tlsStats.reloads += 1
      logger.notice("TLS certificate reloaded", metadata: ["cert": "\(cert)"])
    } catch {
      tlsStats.reloadFailures += 1
      logger.error("TLS reload refused; the previous certificate stays in force", metadata: ["error": "\(error)"])
    }
  }

  /// A new socket speaks TLS first: its handshake must end within `--hello-timeout`.
  func startTLS(_ conn: ServerConnection) {
    guard let context = tlsContext else { return }
    conn.transport.sealer = TLSConnection(context: context)
    tlsDeadlines.add(conn.id.raw, dueMs: now.monoMs + config.core.helloTimeoutMs)
  }

  func tlsHandshakeFailed(reason: String, detail: String) {
    tlsStats.failures[reason, default: 0] += 1
    logger.debug("TLS handshake failed", metadata: ["reason": "\(reason)", "detail": "\(detail)"])
  }

  /// The sweep's TLS part: a handshake not done within `--hello-timeout` ends.
  func sweepTLS(nowMs: Int64) {
    for raw in tlsDeadlines.popDue(nowMs: nowMs) {
      guard let conn = connections[ConnectionID(raw)], let tls = conn.tls, tls.state == .handshaking else { continue }
      conn.tlsFailed(tls, "timeout", "handshake not done within the hello timeout")
      conn.abort()
    }
  }

  func refreshTLSMetrics() {
    guard tlsContext != nil else { return }
    metrics.mirrorCounter("relay_tls_handshakes_total", tlsStats.handshakes)
    for (reason, n) in tlsStats.failures.sorted(by: { $0.key < $1.key }) {
      metrics.mirrorCounter("relay_tls_handshake_failures_total", labels: [("reason", reason)], n)
    }
    metrics.mirrorCounter("relay_tls_reloads_total", tlsStats.reloads)
    metrics.mirrorCounter("relay_tls_reload_failures_total", tlsStats.reloadFailures)
  }
}

/// TLS counters for `/metrics`.
struct TLSStats {
  var handshakes: UInt64 = 0
  var failures: [String: UInt64] = [:]
  var reloads: UInt64 = 0
  var reloadFailures: UInt64 = 0
}
