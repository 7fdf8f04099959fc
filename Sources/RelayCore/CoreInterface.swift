// The contract between the pure relay core and the I/O shell (RelayServer).
// The shell owns sockets and clocks; the core owns every rule of protocol/.
// Inputs carry the instant they happen at; outputs are `Effect`s.

/// A transport connection, numbered by the shell. Never reused within a process.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
  public let raw: UInt64
  public init(_ raw: UInt64) { self.raw = raw }
  public static func < (a: ConnectionID, b: ConnectionID) -> Bool { a.raw < b.raw }
  public var description: String { "c\(raw)" }
}

/// The moment an input happens. `monoMs` orders deadlines; `wallMs` (Unix ms) only
/// stamps events (`ts`, `raisedAt`, `joinedAt`, `expiresAt`) and checks JWT times.
public struct Instant: Sendable, Equatable {
  public var monoMs: Int64
  public var wallMs: Int64
  /// How long before `monoMs` the input may have reached the relay: the shell's loop
  /// was busy (or the process stopped) that long and read it only now. Rate windows
  /// count the input as early as that allows (RateWindow.swift), so a client is not
  /// charged for the relay's own stall. An input like any other: replicas fed from
  /// the shared log get 0.
  public var lateMs: Int64
  public init(monoMs: Int64, wallMs: Int64, lateMs: Int64 = 0) {
    self.monoMs = monoMs
    self.wallMs = wallMs
    self.lateMs = lateMs
  }
}

/// Source of unguessable identifiers (session ids, call ids, resume tokens).
/// Production draws from OpenSSL's RNG; tests and the simulator use a seeded one,
/// so the core stays deterministic.
public protocol IdentifierSource: AnyObject {
  /// `byteCount` random bytes, URL-safe base64 without padding.
  func token(byteCount: Int) -> String
}

/// Immutable encoded message bytes (one JSON object, UTF-8), created once per event
/// and shared by reference with every recipient: the shell frames it once.
public final class Payload: @unchecked Sendable {
  public let bytes: [UInt8]
  public init(_ bytes: [UInt8]) { self.bytes = bytes }
}

/// What the core asks the shell to do.
public enum Effect: Sendable {
  /// Send the same text message to each connection, in this order of effects.
  case send(Payload, to: [ConnectionID])
  /// Close the connection with this WebSocket close code and reason, after
  /// flushing what was queued before it.
  case close(ConnectionID, code: UInt16, reason: String)
  /// POST this JSON body to the webhook (if one is configured), event name in
  /// `X-Relay-Event`.
  case webhook(event: String, body: Payload)
  /// Send this push to a device (§9a). Clustered, performed only by the node that
  /// owns the record's side effects, like webhooks.
  case push(PushJob)
}
