// A sans-I/O codec for RESP2, the Redis serialization protocol
// (https://redis.io/docs/latest/develop/reference/protocol-spec/): commands out as
// arrays of bulk strings, replies in as values parsed incrementally from any split
// of the byte stream (`RESPParser`). The cluster bus is the only user; it needs no RESP3.

/// One reply value.
public enum RESPValue: Equatable, Sendable {
  case simple(String)
  case error(String)
  case integer(Int64)
  /// A bulk string; nil is the null bulk string (`$-1`).
  case bulk([UInt8]?)
  /// An array; nil is the null array (`*-1`, e.g. a blocking read that timed out).
  case array([RESPValue]?)

  /// The bytes of a bulk or simple string.
  public var bytes: [UInt8]? {
    switch self {
    case .bulk(let b): return b
    case .simple(let s): return Array(s.utf8)
    default: return nil
    }
  }

  public var string: String? { bytes.map { String(decoding: $0, as: UTF8.self) } }
}

public enum RESP {
  /// Encodes one command as an array of bulk strings (binary safe).
  public static func command(_ args: [[UInt8]]) -> [UInt8] {
    var out: [UInt8] = []
    out.reserveCapacity(16 + args.reduce(0) { $0 + $1.count + 16 })
    out.append(UInt8(ascii: "*"))
    out.append(contentsOf: String(args.count).utf8)
    out.append(contentsOf: [13, 10])
    for arg in args {
      out.append(UInt8(ascii: "$"))
      out.append(contentsOf: String(arg.count).utf8)
      out.append(contentsOf: [13, 10])
      out.append(contentsOf: arg)
      out.append(contentsOf: [13, 10])
    }
    return out
  }

  public static func command(_ args: String...) -> [UInt8] { command(args.map { Array($0.utf8) }) }
}

/// Why the reply stream cannot be parsed: the connection must be dropped.
public struct RESPError: Error, Equatable {
  public let message: String

  /// An error with a message for the log.
  public init(message: String) { self.message = message }
}
