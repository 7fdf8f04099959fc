// One node's replica of the cluster's relay (docs/cluster.md). Every node applies
// the same log, entry by entry, to its own `RelayCore`; the core is deterministic
// (DESIGN.md), so every replica holds the same sessions, hands, calls, `seq` and
// resume tokens. A node executes only the effects that concern it: writes to its own
// sockets (the shell's connection table filters those) and, for webhooks, those of
// the entries it logged itself, so each webhook is POSTed once by the cluster.
//
// Node liveness is part of the replicated state too: every entry of a node counts as
// its beat, and a node whose last entry is older than `nodeTimeoutMs` on the log's
// clock is dead on every replica at the same entry. Its connections then end as
// lost (§5) on every replica, and any later entry it logs is ignored: a node that
// was paused or cut off cannot write with its old identity (it rejoins under a new
// number). A silence of the whole log (Redis unreachable for everyone) is not
// anyone's death: after a gap, every node gets a fresh `nodeTimeoutMs`.
public import RelayCore
import RelayProtocol
import RelayWebSocket

/// Ids for the replicated core: the same on every replica, unguessable outside the
/// cluster. Draw n is `HMAC-SHA256(seed, n)`, URL-safe base64; the seed is the log
/// generation's secret, shared through Redis.
public final class LogIdentifiers: IdentifierSource {
  private let seed: [UInt8]
  private let hmac: ([UInt8], [UInt8]) -> [UInt8]
  private var counter: UInt64 = 0

  public init(seed: [UInt8], hmac: @escaping (_ key: [UInt8], _ message: [UInt8]) -> [UInt8]) {
    self.seed = seed
    self.hmac = hmac
  }

  public func token(byteCount: Int) -> String {
    var out: [UInt8] = []
    var block: UInt32 = 0
    while out.count < byteCount {
      counter += 1
      var message: [UInt8] = []
      withUnsafeBytes(of: counter.littleEndian) { message.append(contentsOf: $0) }
      withUnsafeBytes(of: block.littleEndian) { message.append(contentsOf: $0) }
      out.append(contentsOf: hmac(seed, message))
      block += 1
    }
    return Base64URL.encode(Array(out.prefix(byteCount)))
  }
}

/// What applying one entry produced.
public struct Applied {
  /// The core's effects, in order.
  public var effects: [Effect] = []
  /// The entry was logged by this replica's own node: its webhooks are ours to POST
  /// and its admin result ours to answer.
  public var ours = false
  /// The answer to an HTTP admin action logged by this node.
  public var admin: (request: UInt64, result: AdminResult)?
  /// Nodes found dead at this entry, in number order.
  public var deaths: [UInt32] = []
}

/// The outcome of an `AdminAction`, for the HTTP answer.
public enum AdminResult: Equatable {
  case sessionCreated(String)
  case participantRemoved(Bool)
  case call(CallHTTPResult)
  /// `GET /v1/sessions/{id}` body; nil → 404.
  case sessionInfo([UInt8]?)
  /// `GET /v1/calls/{id}` body; nil → 404.
  case callInfo([UInt8]?)
  /// The bearer token was not valid at the entry's instant.
  case unauthorized
}

/// A node as every replica sees it.
public struct NodeRecord: Equatable {
  public var name: String
  public var lastSeenMs: Int64
}

public final class Replica {
  public let core: RelayCore
  /// This replica's own node number (0 before it has joined).
  public var localNode: UInt32
  public let nodeTimeoutMs: Int64
  /// Live nodes by number.
  public private(set) var nodes: [UInt32: NodeRecord] = [:]
  /// Nodes declared dead or gone; their later entries are ignored.
  public private(set) var retired: Set<UInt32> = []
  /// The log's clock: the largest entry time seen (entries of different nodes may
  /// be a few ms out of order; the core's time never goes back).
  public private(set) var clockMs: Int64 = 0
  /// Open connections per node, to end them when their node dies.
  private var connectionsByNode: [UInt32: Set<UInt64>] = [:]

  public init(core: RelayCore, localNode: UInt32, nodeTimeoutMs: Int64) {
    self.core = core
    self.localNode = localNode
    self.nodeTimeoutMs = nodeTimeoutMs
  }

  /// The node whose turn it is to log `tick`s for the core's deadlines: the live node
  /// with the lowest number. Every replica agrees on it.
  public var ticker: UInt32? { nodes.keys.min() }

  /// When the next death may be declared, if no entry comes from that node first.
  public var nextDeathCheckMs: Int64? {
    nodes.values.map { $0.lastSeenMs + nodeTimeoutMs + 1 }.min()
  }

  /// Connection ids of a node, as the shell numbers them: node in the top 24 bits.
  public static func connectionID(node: UInt32, local: UInt64) -> ConnectionID {
    ConnectionID(UInt64(node) << 40 | (local & (1 << 40 - 1)))
  }

  public static func node(of c: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: c >> 40) }

  /// Applies one entry of the log.
  public func apply(_ entry: LogEntry) -> Applied {
    var applied = Applied()
    let gap = entry.wallMs - clockMs
    clockMs = max(clockMs, entry.wallMs)
    let at = Instant(monoMs: clockMs, wallMs: clockMs)
    if gap > nodeTimeoutMs / 2, clockMs > 0 {
      // The log itself was silent: nobody could write, so nobody's silence counts.
      for n in nodes.keys { nodes[n]?.lastSeenMs = clockMs }
    }
    applied.deaths = declareDeaths(at: at)
    core.tick(at: at)
    if retired.contains(entry.node) {
      applied.effects = core.takeEffects()
      return applied
    }
    applied.ours = entry.node == localNode
    if case .join(let name) = entry.input {
      nodes[entry.node] = NodeRecord(name: name, lastSeenMs: clockMs)
    } else if nodes[entry.node] == nil {
      // A node this replica never saw join (its join is older than the log, or
      // it is a number from before a reset): refuse it, as a dead one.
      retired.insert(entry.node)
      applied.effects = core.takeEffects()
      return applied
    }
    nodes[entry.node]?.lastSeenMs = clockMs
    applied.admin = input(entry, at: at)
    applied.effects = core.takeEffects()
    return applied
  }

  private func input(_ entry: LogEntry, at: Instant) -> (UInt64, AdminResult)? {
    switch entry.input {
    case .join, .beat, .tick:
      return nil
    case .leave:
      retire(entry.node, at: at)
      return nil
    case .open(let c):
      // A repeated `open` (an append retried after a lost reply) is ignored.
      guard Self.node(of: c) == entry.node, connectionsByNode[entry.node, default: []].insert(c).inserted else {
        return nil
      }
      core.open(ConnectionID(c), at: at)
    case .text(let c, let bytes):
      guard Self.node(of: c) == entry.node else { return nil }
      core.receive(ConnectionID(c), text: bytes, at: at)
    case .closed(let c, let clean):
      guard Self.node(of: c) == entry.node else { return nil }
      connectionsByNode[entry.node]?.remove(c)
      core.closed(ConnectionID(c), clean: clean, at: at)
    case .admin(let request, let action):
      return (request, Self.run(action, on: core, at: at))
    }
    return nil
  }

  /// Runs an admin action on a core: standalone directly, clustered inside `apply`.
  public static func run(_ action: AdminAction, on core: RelayCore, at: Instant) -> AdminResult {
    switch action {
    case .createSession:
      return .sessionCreated(core.createSession(at: at))
    case .removeParticipant(let session, let uid):
      return .participantRemoved(core.removeParticipant(session: session, uid: uid, at: at))
    case .call(let action, let callId, let token):
      guard let identity = core.verifyUserToken(token, at: at) else { return .unauthorized }
      return .call(core.callAction(action, callId: callId, identity: identity, at: at))
    case .sessionInfo(let session):
      return .sessionInfo(core.sessionInfo(session))
    case .callInfo(let callId, let token):
      guard let identity = core.verifyUserToken(token, at: at) else { return .unauthorized }
      return .callInfo(core.callInfo(callId: callId, uid: identity.uid))
    }
  }

  private func declareDeaths(at: Instant) -> [UInt32] {
    let dead = nodes.filter { at.monoMs - $0.value.lastSeenMs > nodeTimeoutMs }.keys.sorted()
    for n in dead { retire(n, at: at) }
    return dead
  }

  /// A node is gone: its connections end as lost (§5; grace then runs as for any
  /// lost connection), in id order so every replica emits the same events.
  private func retire(_ n: UInt32, at: Instant) {
    nodes[n] = nil
    retired.insert(n)
    for c in (connectionsByNode.removeValue(forKey: n) ?? []).sorted() {
      core.closed(ConnectionID(c), clean: false, at: at)
    }
  }
}
