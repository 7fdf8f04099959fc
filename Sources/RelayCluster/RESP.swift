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
    arrayHeader(args.count, into: &out)
    for arg in args { bulk(arg, into: &out) }
    return out
  }

  /// The command `before + [payload] + after` without the payload's bytes: what goes
  /// before them and after them, so that the payload (megabytes of a snapshot) is
  /// written by reference, never copied into the command.
  public static func command(_ before: [[UInt8]], payloadCount: Int, after: [[UInt8]]) -> (head: [UInt8], tail: [UInt8]) {
    var head: [UInt8] = []
    arrayHeader(before.count + 1 + after.count, into: &head)
    for arg in before { bulk(arg, into: &head) }
    head.append(UInt8(ascii: "$"))
    head.append(contentsOf: String(payloadCount).utf8)
    head.append(contentsOf: [13, 10])
    var tail: [UInt8] = [13, 10]
    for arg in after { bulk(arg, into: &tail) }
    return (head, tail)
  }

  private static func arrayHeader(_ count: Int, into out: inout [UInt8]) {
    out.append(UInt8(ascii: "*"))
    out.append(contentsOf: String(count).utf8)
    out.append(contentsOf: [13, 10])
  }

  private static func bulk(_ arg: [UInt8], into out: inout [UInt8]) {
    out.append(UInt8(ascii: "$"))
    out.append(contentsOf: String(arg.count).utf8)
    out.append(contentsOf: [13, 10])
    out.append(contentsOf: arg)
    out.append(contentsOf: [13, 10])
  }

  public static func command(_ args: String...) -> [UInt8] { command(args.map { Array($0.utf8) }) }
}

/// Why the reply stream cannot be parsed: the connection must be dropped.
public struct RESPError: Error, Equatable {
  public let message: String

  /// An error with a message for the log.
  public init(message: String) { self.message = message }
}
