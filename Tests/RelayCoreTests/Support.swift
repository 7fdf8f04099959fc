// Test harness for the core: injected time, seeded ids, effects rendered as text so
// expectations show the exact wire JSON.
import RelayProtocol
import Testing

@testable import RelayCore
import RelayPrimitives

/// Deterministic ids: "<prefix>1", "<prefix>2", … (URL-safe). With `long`, shaped as
/// production's instead: URL-safe base64 of `byteCount` bytes (32 characters for a
/// resume token, which the core then keeps packed), distinct per call.
final class SeededIDs: IdentifierSource {
  var counter = 0
  let prefix: String
  var long: Bool
  init(prefix: String = "id", long: Bool = false) {
    self.prefix = prefix
    self.long = long
  }
  func token(byteCount: Int) -> String {
    counter += 1
    guard long else { return "\(prefix)\(counter)" }
    let salt = prefix.utf8.reduce(UInt64(0)) { $0 &* 31 &+ UInt64($1) }
    var rng = SeededRandom(seed: UInt64(counter) &* 0x9E37_79B9_7F4A_7C15 ^ salt)
    let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)
    let chars = (0..<((byteCount * 8 + 5) / 6)).map { _ in alphabet[rng.below(64)] }
    return String(decoding: chars, as: UTF8.self)
  }
}

/// Drives one RelayCore with a manual clock, and §5 heartbeats as the shell runs them
/// (RelayPrimitives `Heartbeats`), so liveness tests see the whole path: `advance`
/// fires them; a ping is rendered `ping cN`, a silent connection `drop cN`, followed by
/// the `closed(clean: false)` the shell then reports. A connection the core already
/// closed or is closing gets neither (the shell's socket is gone or closing).
final class Harness {
  let core: RelayCore
  let ids = SeededIDs()
  var now = Instant(monoMs: 1_000, wallMs: 1_700_000_000_000)
  var heartbeats: Heartbeats
  var slots: [ConnectionID: Heartbeats.Slot] = [:]
  /// The shell's own lines since the last `out()`.
  private var shellLines: [String] = []
  /// Called when the shell's heartbeats drop a connection, before its `closed`.
  var onDrop: ((ConnectionID) -> Void)?
  /// Token → identity for token mode ("valid" tokens); anything else is refused.
  var tokens: [String: Identity]

  init(devMode: Bool = true, tokens: [String: Identity] = [:], configure: (inout CoreConfig) -> Void = { _ in }) {
    var config = CoreConfig(devMode: devMode, serverVersion: "test")
    configure(&config)
    self.tokens = tokens
    let table = tokens
    core = RelayCore(config: config, ids: ids, verifyToken: { token, _ in table[token] })
    heartbeats = Heartbeats(intervalMs: config.heartbeatIntervalMs, timeoutMs: config.heartbeatTimeoutMs)
  }

  func advance(_ ms: Int64) {
    now.monoMs += ms
    now.wallMs += ms
    core.tick(at: now)
    heartbeatsDue()
  }

  /// The shell's heartbeat checks due by now.
  func heartbeatsDue() {
    while let next = heartbeats.nextDeadlineMs, next <= now.monoMs {
      let due = heartbeats.due(nowMs: now.monoMs)
      for raw in due.ping where shellHolds(ConnectionID(raw)) { shellLines.append("ping c\(raw)") }
      for raw in due.timedOut where shellHolds(ConnectionID(raw)) {
        let c = ConnectionID(raw)
        shellLines.append("drop \(c)")
        onDrop?(c)
        closed(raw, clean: false)
      }
    }
  }

  /// Whether the shell still has an open socket for `c`; a gone one is forgotten.
  private func shellHolds(_ c: ConnectionID) -> Bool {
    if let connection = core.connections[c], connection.phase != .closing { return true }
    if let slot = slots.removeValue(forKey: c) { heartbeats.closed(slot) }
    return false
  }

  @discardableResult
  func open(_ n: UInt64) -> ConnectionID {
    let c = ConnectionID(n)
    slots[c] = heartbeats.opened(n, nowMs: now.monoMs)
    core.open(c, at: now)
    return c
  }

  func send(_ n: UInt64, _ json: String) {
    alive(n)
    core.receive(ConnectionID(n), text: Array(json.utf8), at: now)
  }

  /// An inbound frame that is not a message (a pong): the shell notes it; the core
  /// never hears of it.
  func alive(_ n: UInt64) {
    if let slot = slots[ConnectionID(n)] { heartbeats.inbound(slot, nowMs: now.monoMs) }
  }

  /// The socket is gone, as the shell reports it.
  func closed(_ n: UInt64, clean: Bool) {
    if let slot = slots.removeValue(forKey: ConnectionID(n)) { heartbeats.closed(slot) }
    core.closed(ConnectionID(n), clean: clean, at: now)
  }

  /// Opens connection `n` and says hello in dev mode; drains the welcome.
  func connect(_ n: UInt64, uid: String, role: String = "participant") {
    open(n)
    send(n, #"{"type":"hello","dev":{"uid":"\#(uid)","name":"\#(uid.uppercased())","role":"\#(role)"}}"#)
    _ = out()
  }

  /// `connect` then `session.join` of `session`; drains.
  func join(_ n: UInt64, uid: String, role: String = "participant", session: String = "s") {
    connect(n, uid: uid, role: role)
    send(n, #"{"type":"session.join","session":"\#(session)"}"#)
    _ = out()
  }

  /// Drains effects, rendered one per line: `c1,c2 <- {json}` / `close c1 4501 reason`.
  func out() -> [String] {
    defer { shellLines.removeAll() }
    return shellLines + core.takeEffects().map(Harness.render)
  }

  static func render(_ effect: Effect) -> String {
    switch effect {
    case .send(let payload, let to):
      return to.map(\.description).joined(separator: ",") + " <- " + String(decoding: payload.bytes, as: UTF8.self)
    case .close(let c, let code, let reason): return "close \(c) \(code) \(reason)"
    case .webhook(let event, let body): return "webhook \(event) " + String(decoding: body.bytes, as: UTF8.self)
    case .push(let job): return "push \(job)"
    }
  }

  var ts: Int64 { now.wallMs }
}

/// Config without §5 heartbeats, for tests about other deadlines.
func withoutHeartbeats(_ config: inout CoreConfig) {
  config.heartbeatIntervalMs = 0
  config.heartbeatTimeoutMs = 0
}

/// The JSON of the messages delivered to connection `n` in rendered output.
func delivered(to n: UInt64, _ lines: [String]) -> [String] {
  lines.compactMap { line in
    guard let arrow = line.firstRange(of: " <- ") else { return nil }
    let recipients = line[..<arrow.lowerBound].split(separator: ",")
    return recipients.contains(Substring("c\(n)")) ? String(line[arrow.upperBound...]) : nil
  }
}

/// `seq` of a rendered event, when present.
func seqOf(_ json: String) -> Int64? {
  (try? JSONParser.parse(json))?["seq"]?.numberValue?.int64
}

func typeOf(_ json: String) -> String? {
  (try? JSONParser.parse(json))?["type"]?.stringValue
}
