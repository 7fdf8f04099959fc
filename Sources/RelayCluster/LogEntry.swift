public import RelayCore

// The cluster log's entries (docs/cluster.md): every input of the replicated core,
// as compact binary, one Redis Stream entry each. Every node applies every entry in
// stream order, so every replica of the core sees the same inputs at the same
// instants and produces the same state, the same `seq` and the same ids.

/// An action on shared state requested over HTTP (contract §6, §9 call actions),
/// answered by the node that logged it once the entry is applied.
public enum AdminAction: Equatable, Sendable {
  case createSession
  case removeParticipant(session: String, uid: String)
  /// `token`: the caller's bearer JWT, verified by every replica at the entry's
  /// instant.
  case call(CallAction, callId: String, token: String)
  /// Reads (`GET /v1/sessions/{id}`, `GET /v1/calls/{id}`) go through the log too,
  /// so a node answers them with every earlier write applied, wherever it was made.
  case sessionInfo(session: String)
  case callInfo(callId: String, token: String)
}

/// One input of the replicated core.
public enum LogInput: Equatable, Sendable {
  /// A node joins the cluster (or rejoins under a new number after being declared
  /// dead); `name` is its `--node-id`.
  case join(name: String)
  /// A node leaves cleanly at the end of a drain.
  case leave
  /// A node's liveness beat; any entry of a node also counts as one.
  case beat
  /// Fires the core's due deadlines (any entry does, this one carries nothing else).
  case tick
  case open(connection: UInt64)
  case text(connection: UInt64, [UInt8])
  case closed(connection: UInt64, clean: Bool)
  case admin(request: UInt64, AdminAction)
}

/// An entry: who logged it, when (its node's wall clock, Unix ms) and what.
public struct LogEntry: Equatable, Sendable {
  public var node: UInt32
  public var wallMs: Int64
  public var input: LogInput

  public init(node: UInt32, wallMs: Int64, input: LogInput) {
    self.node = node
    self.wallMs = wallMs
    self.input = input
  }
}

extension LogEntry {
  /// Layout: kind (1 byte), node (4), wallMs (8), then the kind's fields; integers
  /// little-endian, strings and byte strings prefixed by a 4-byte length.
  public func encoded() -> [UInt8] {
    var w = ByteWriter()
    switch input {
    case .join(let name): w.header(1, self); w.string(name)
    case .leave: w.header(2, self)
    case .beat: w.header(3, self)
    case .tick: w.header(4, self)
    case .open(let c): w.header(5, self); w.u64(c)
    case .text(let c, let bytes): w.header(6, self); w.u64(c); w.bytes(bytes)
    case .closed(let c, let clean): w.header(7, self); w.u64(c); w.out.append(clean ? 1 : 0)
    case .admin(let request, let action):
      w.header(8, self)
      w.u64(request)
      switch action {
      case .createSession: w.out.append(0)
      case .removeParticipant(let session, let uid): w.out.append(1); w.string(session); w.string(uid)
      case .sessionInfo(let session): w.out.append(3); w.string(session)
      case .callInfo(let callId, let token): w.out.append(4); w.string(callId); w.string(token)
      case .call(let a, let callId, let token):
        w.out.append(2)
        w.out.append(a.code)
        w.string(callId)
        w.string(token)
      }
    }
    return w.out
  }

  /// Nil for bytes that are not an entry of this version (a foreign or corrupt log
  /// entry is skipped by every replica alike).
  public init?(decoding bytes: [UInt8]) {
    var r = ByteReader(bytes: bytes)
    guard let kind = r.u8(), let node = r.u32(), let wall = r.u64() else { return nil }
    let input: LogInput
    switch kind {
    case 1: guard let name = r.string() else { return nil }; input = .join(name: name)
    case 2: input = .leave
    case 3: input = .beat
    case 4: input = .tick
    case 5: guard let c = r.u64() else { return nil }; input = .open(connection: c)
    case 6: guard let c = r.u64(), let b = r.bytes() else { return nil }; input = .text(connection: c, b)
    case 7: guard let c = r.u64(), let clean = r.u8() else { return nil }; input = .closed(connection: c, clean: clean == 1)
    case 8:
      guard let request = r.u64(), let sub = r.u8() else { return nil }
      switch sub {
      case 0: input = .admin(request: request, .createSession)
      case 1:
        guard let s = r.string(), let u = r.string() else { return nil }
        input = .admin(request: request, .removeParticipant(session: s, uid: u))
      case 2:
        guard let code = r.u8(), let a = CallAction(code: code), let id = r.string(), let t = r.string() else {
          return nil
        }
        input = .admin(request: request, .call(a, callId: id, token: t))
      case 3:
        guard let session = r.string() else { return nil }
        input = .admin(request: request, .sessionInfo(session: session))
      case 4:
        guard let id = r.string(), let t = r.string() else { return nil }
        input = .admin(request: request, .callInfo(callId: id, token: t))
      default: return nil
      }
    default: return nil
    }
    guard r.atEnd else { return nil }
    self.init(node: node, wallMs: Int64(bitPattern: wall), input: input)
  }
}

extension CallAction {
  fileprivate var code: UInt8 {
    switch self {
    case .accept: return 0
    case .cancel: return 1
    case .reject(.declined): return 2
    case .reject(.busy): return 3
    }
  }

  fileprivate init?(code: UInt8) {
    switch code {
    case 0: self = .accept
    case 1: self = .cancel
    case 2: self = .reject(.declined)
    case 3: self = .reject(.busy)
    default: return nil
    }
  }
}

extension LogEntry {
  /// One stream entry holds the inputs a node logged in one loop turn, in order:
  /// each entry's bytes behind a 4-byte little-endian length.
  public static func encodeBatch(_ entries: [LogEntry]) -> [UInt8] {
    var w = ByteWriter()
    for e in entries { w.bytes(e.encoded()) }
    return w.out
  }

  /// Nil unless every part is a valid entry (a corrupt stream entry is skipped
  /// whole, by every replica alike).
  public static func decodeBatch(_ bytes: [UInt8]) -> [LogEntry]? {
    var r = ByteReader(bytes: bytes)
    var out: [LogEntry] = []
    while !r.atEnd {
      guard let part = r.bytes(), let entry = LogEntry(decoding: part) else { return nil }
      out.append(entry)
    }
    return out.isEmpty ? nil : out
  }
}

private struct ByteWriter {
  var out: [UInt8] = []
  mutating func header(_ kind: UInt8, _ e: LogEntry) {
    out.append(kind)
    u32(e.node)
    u64(UInt64(bitPattern: e.wallMs))
  }
  mutating func u32(_ v: UInt32) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
  mutating func u64(_ v: UInt64) { withUnsafeBytes(of: v.littleEndian) { out.append(contentsOf: $0) } }
  mutating func bytes(_ b: [UInt8]) { u32(UInt32(b.count)); out.append(contentsOf: b) }
  mutating func string(_ s: String) { bytes(Array(s.utf8)) }
}

private struct ByteReader {
  let data: [UInt8]
  var i = 0
  init(bytes: [UInt8]) { data = bytes }
  var atEnd: Bool { i == data.count }
  mutating func u8() -> UInt8? {
    guard i < data.count else { return nil }
    defer { i += 1 }
    return data[i]
  }
  mutating func little(_ n: Int) -> UInt64? {
    guard data.count - i >= n else { return nil }
    var v: UInt64 = 0
    for k in 0..<n { v |= UInt64(data[i + k]) << (8 * UInt64(k)) }
    i += n
    return v
  }
  mutating func u32() -> UInt32? { little(4).map { UInt32($0) } }
  mutating func u64() -> UInt64? { little(8) }
  mutating func bytes() -> [UInt8]? {
    guard let n = u32(), data.count - i >= Int(n) else { return nil }
    defer { i += Int(n) }
    return Array(data[i..<(i + Int(n))])
  }
  mutating func string() -> String? { bytes().map { String(decoding: $0, as: UTF8.self) } }
}
