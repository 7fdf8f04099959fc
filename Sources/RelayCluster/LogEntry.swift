public import RelayCore
import RelayProtocol

// The cluster log's records (docs/cluster.md, protocol/PROTOCOL.md §13.1): every input
// of the replicated core, as compact binary. One Redis Stream entry is one record: the
// inputs one node logged in one loop turn (field `e`), its position in the log (`n`,
// 1, 2, 3, … counted by Redis inside the append script) and Redis's clock at the
// append (`t`, Unix ms from `TIME`). Every node applies every record in stream order,
// so every replica of the core sees the same inputs at the same instants.
//
// Records are read back from Redis, where anything with write access could have put
// anything: decoding is bounds-checked, every length is checked against what is left
// before anything is allocated, and a record that does not decode is rejected, the
// same way on every replica (Replica.swift).

/// An action on shared state requested over HTTP (contract §6, §9 call actions),
/// answered by the node that logged it once the record is applied.
public enum AdminAction: Equatable, Sendable {
  case createSession
  case removeParticipant(session: String, uid: String)
  /// `token`: the caller's bearer JWT, verified by every replica at the record's
  /// instant.
  case call(CallAction, callId: String, token: String)
  /// Reads (`GET /v1/sessions/{id}`, `GET /v1/calls/{id}`) go through the log too,
  /// so a node answers them with every earlier write applied, wherever it was made.
  case sessionInfo(session: String)
  case callInfo(callId: String, token: String)
  /// §9a `PUT|DELETE /v1/push/devices/{device}` with the user's bearer JWT.
  case pushDevice(PushDeviceAction, device: String, token: String)
  /// §9a a provider reported `token` of `uid` gone: removed on every replica. Logged
  /// by the node whose push got that answer; nobody waits for its result.
  case removePushToken(uid: String, token: String)
}

/// What a node must share with every other node of a generation to replay the same
/// log into the same state: the record format, the core's rules, and a digest of the
/// flags that change outcomes (timings, limits, the secret's fingerprint).
public struct ClusterRules: Equatable, Sendable {
  public var format: UInt8
  public var rules: UInt32
  /// SHA-256 of the canonical list of shared flags (`ServerConfig.sharedFlagsDigest`).
  public var configDigest: [UInt8]

  public init(format: UInt8 = LogBatch.formatVersion, rules: UInt32, configDigest: [UInt8]) {
    self.format = format
    self.rules = rules
    self.configDigest = configDigest
  }
}

/// A node's request to join a generation. The number is assigned by the replicated
/// state when the join is applied (never by a Redis counter that could be evicted),
/// so numbers are never reused within a generation; the node recognises its own join
/// by `nonce`.
public struct JoinRequest: Equatable, Sendable {
  public var name: String
  public var nonce: UInt64
  public var rules: ClusterRules

  public init(name: String, nonce: UInt64, rules: ClusterRules) {
    self.name = name
    self.nonce = nonce
    self.rules = rules
  }
}

/// One input of the replicated core.
public enum LogInput: Equatable, Sendable {
  /// A node joins the cluster (or rejoins under a new number after being declared
  /// dead). Logged with node 0: the number comes from applying it.
  case join(JoinRequest)
  /// A node leaves cleanly at the end of a drain.
  case leave
  /// A node's liveness beat; any record of a node also counts as one.
  case beat
  /// Fires the core's due deadlines (any record does, this one carries nothing else).
  case tick
  case open(connection: UInt64)
  case text(connection: UInt64, [UInt8])
  case closed(connection: UInt64, clean: Bool)
  case admin(request: UInt64, AdminAction)
  /// A replica's digest of its state at log position `position` (a snapshot point);
  /// `stored`: logged by the node that stored that snapshot in Redis — the reference
  /// every replica compares its own digest with.
  case digest(position: UInt64, digest: [UInt8], stored: Bool)
  /// A node of a newer rules version asks this generation to hand its state over
  /// (docs/cluster.md, "Rolling upgrades"). Logged with node 0.
  case upgrade(rules: UInt32)
}

/// The inputs one node logged in one loop turn (field `e` of a stream entry).
public struct LogBatch: Equatable, Sendable {
  /// Bumped whenever the byte layout changes; a record of another version is rejected.
  public static let formatVersion: UInt8 = 3

  public var node: UInt32
  public var inputs: [LogInput]

  public init(node: UInt32, inputs: [LogInput]) {
    self.node = node
    self.inputs = inputs
  }
}

/// Bounds on decoded values: the shell's own limits, so a record can carry nothing a
/// socket could not have delivered.
public struct LogLimits: Sendable {
  /// Largest `text` input (`--max-message-bytes`).
  public var maxTextBytes: Int
  /// Node names (`--node-id`).
  public var maxNameBytes = 256
  /// Session ids, uids, call ids and bearer tokens of admin actions.
  public var maxFieldBytes = 8_192
  /// Inputs in one record.
  public var maxInputs = 1 << 20

  public init(maxTextBytes: Int) { self.maxTextBytes = maxTextBytes }
}

extension LogBatch {
  /// Layout: version (1 byte), node (4), then each input behind a 4-byte length; an
  /// input is its kind (1 byte) then its fields. Integers little-endian, strings and
  /// byte strings behind a 4-byte length.
  public func encoded() -> [UInt8] {
    var w = BinaryWriter()
    encode(into: &w)
    return w.bytes
  }

  /// `encoded()` written at the end of `w` (a buffer that holds other frames): each
  /// input's length is written once the input is.
  public func encode(into w: inout BinaryWriter) {
    w.u8(Self.formatVersion)
    w.u32(node)
    for input in inputs {
      let at = w.bytes.count
      w.u32(0)
      w.input(input)
      w.patchU32(UInt32(w.bytes.count - at - 4), at: at)
    }
  }

  /// A text input's kind byte and its fields before the text: kind (1), connection
  /// (8), the text's length (4).
  static let textInputOverhead = 13
  static let textKind: UInt8 = 6

  /// The batch `bytes` hold when it is one `text` input, as `LogBatch(decoding:)` would
  /// give it (the same checks, the text left where it lies); nil for any other batch,
  /// which `LogBatch(decoding:)` then decides on. Most records of a relay are one
  /// message of one socket: they are applied without a copy of the message.
  public static func singleText(
    _ bytes: UnsafeRawBufferPointer, limits: LogLimits
  ) -> (node: UInt32, connection: UInt64, text: UnsafeRawBufferPointer)? {
    let head = 9  // version, node, the input's length
    guard bytes.count >= head + textInputOverhead, limits.maxInputs > 0, bytes[0] == formatVersion,
      bytes[head] == textKind, Int(bytes.loadLE32(at: 5)) == bytes.count - head
    else { return nil }
    let textStart = head + textInputOverhead
    let n = Int(bytes.loadLE32(at: textStart - 4))
    guard n == bytes.count - textStart, n <= limits.maxTextBytes else { return nil }
    return (bytes.loadLE32(at: 1), bytes.loadLE64(at: head + 1), UnsafeRawBufferPointer(rebasing: bytes[textStart...]))
  }

  /// Nil for bytes that are not a batch of this version within `limits`.
  public init?(decoding bytes: [UInt8], limits: LogLimits) {
    var r = BinaryReader(bytes)
    guard r.maybeU8() == Self.formatVersion, let node = r.maybeU32() else { return nil }
    var inputs: [LogInput] = []
    while !r.isAtEnd {
      guard inputs.count < limits.maxInputs, let part = r.bytes(max: Int(UInt32.max)) else { return nil }
      var one = BinaryReader(part)
      guard let input = one.input(limits), one.isAtEnd else { return nil }
      inputs.append(input)
    }
    guard !inputs.isEmpty else { return nil }
    self.init(node: node, inputs: inputs)
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

extension BinaryWriter {
  fileprivate mutating func input(_ input: LogInput) {
    switch input {
    case .join(let j):
      u8(1); u64(j.nonce); u8(j.rules.format); u32(j.rules.rules); bytes(j.rules.configDigest); string(j.name)
    case .leave: u8(2)
    case .beat: u8(3)
    case .tick: u8(4)
    case .open(let c): u8(5); u64(c)
    case .text(let c, let b): u8(6); u64(c); bytes(b)
    case .closed(let c, let clean): u8(7); u64(c); u8(clean ? 1 : 0)
    case .admin(let request, let action): u8(8); u64(request); admin(action)
    case .digest(let position, let digest, let stored): u8(9); u64(position); bytes(digest); u8(stored ? 1 : 0)
    case .upgrade(let rules): u8(10); u32(rules)
    }
  }

  fileprivate mutating func admin(_ action: AdminAction) {
    switch action {
    case .createSession: u8(0)
    case .removeParticipant(let session, let uid): u8(1); string(session); string(uid)
    case .call(let a, let callId, let token): u8(2); u8(a.code); string(callId); string(token)
    case .sessionInfo(let session): u8(3); string(session)
    case .callInfo(let callId, let token): u8(4); string(callId); string(token)
    case .pushDevice(.register(let f), let device, let token):
      u8(5); string(device); string(token); string(f.token); string(f.kind); string(f.environment ?? "")
    case .pushDevice(.unregister, let device, let token): u8(6); string(device); string(token)
    case .removePushToken(let uid, let token): u8(7); string(uid); string(token)
    }
  }
}

extension BinaryReader {
  fileprivate mutating func input(_ limits: LogLimits) -> LogInput? {
    let field = limits.maxFieldBytes
    switch maybeU8() {
    case 1:
      guard let nonce = maybeU64(), let format = maybeU8(), let rules = maybeU32(), let digest = bytes(max: 64),
        let name = string(max: limits.maxNameBytes)
      else { return nil }
      return .join(JoinRequest(name: name, nonce: nonce, rules: ClusterRules(format: format, rules: rules, configDigest: digest)))
    case 2: return .leave
    case 3: return .beat
    case 4: return .tick
    case 5: return maybeU64().map { .open(connection: $0) }
    case 6:
      guard let c = maybeU64(), let b = bytes(max: limits.maxTextBytes) else { return nil }
      return .text(connection: c, b)
    case 7:
      guard let c = maybeU64(), let clean = maybeU8(), clean <= 1 else { return nil }
      return .closed(connection: c, clean: clean == 1)
    case 8:
      guard let request = maybeU64(), let action = admin(field) else { return nil }
      return .admin(request: request, action)
    case 9:
      guard let position = maybeU64(), let digest = bytes(max: 64), let stored = maybeU8(), stored <= 1 else { return nil }
      return .digest(position: position, digest: digest, stored: stored == 1)
    case 10: return maybeU32().map { .upgrade(rules: $0) }
    default: return nil
    }
  }

  fileprivate mutating func admin(_ max: Int) -> AdminAction? {
    let code = maybeU8()
    switch code {
    case 0: return .createSession
    case 1:
      guard let s = string(max: max), let u = string(max: max) else { return nil }
      return .removeParticipant(session: s, uid: u)
    case 2:
      guard let code = maybeU8(), let a = CallAction(code: code), let id = string(max: max), let t = string(max: max) else {
        return nil
      }
      return .call(a, callId: id, token: t)
    case 3: return string(max: max).map { .sessionInfo(session: $0) }
    case 4:
      guard let id = string(max: max), let t = string(max: max) else { return nil }
      return .callInfo(callId: id, token: t)
    default: return pushAdmin(code, max)
    }
  }

  /// §9a push actions: the fields are checked again (`PushFields`), the same way on
  /// every replica, so a hand-written record cannot store what a request could not.
  fileprivate mutating func pushAdmin(_ code: UInt8?, _ max: Int) -> AdminAction? {
    switch code {
    case 5:
      guard let device = string(max: max), let bearer = string(max: max), let token = string(max: max),
        let kind = string(max: max), let environment = string(max: max),
        case .success(let fields) = PushFields.registration(
          token: token, kind: kind, environment: environment.isEmpty ? nil : environment, device: nil)
      else { return nil }
      return .pushDevice(.register(fields), device: device, token: bearer)
    case 6:
      guard let device = string(max: max), let bearer = string(max: max) else { return nil }
      return .pushDevice(.unregister, device: device, token: bearer)
    case 7:
      guard let uid = string(max: max), let token = string(max: max) else { return nil }
      return .removePushToken(uid: uid, token: token)
    default: return nil
    }
  }
}

extension UnsafeRawBufferPointer {
  /// A little-endian integer at `offset` (the caller checked the bounds).
  func loadLE32(at offset: Int) -> UInt32 { UInt32(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt32.self)) }
  func loadLE64(at offset: Int) -> UInt64 { UInt64(littleEndian: loadUnaligned(fromByteOffset: offset, as: UInt64.self)) }
}

/// The optional-returning reads a record's decoder uses: any failure rejects the
/// whole record, so the reason does not matter here.
extension BinaryReader {
  fileprivate mutating func maybeU8() -> UInt8? { try? u8() }
  fileprivate mutating func maybeU32() -> UInt32? { try? u32() }
  fileprivate mutating func maybeU64() -> UInt64? { try? u64() }
  /// Bytes no longer than `max` (the length is checked against the input first).
  fileprivate mutating func bytes(max: Int) -> [UInt8]? {
    guard let b = try? bytes(), b.count <= max else { return nil }
    return b
  }
  fileprivate mutating func string(max: Int) -> String? {
    guard let s = try? string(), s.utf8.count <= max else { return nil }
    return s
  }
}
