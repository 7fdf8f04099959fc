// A sans-I/O codec for RESP2, the Redis serialization protocol
// (https://redis.io/docs/latest/develop/reference/protocol-spec/): commands out as
// arrays of bulk strings, replies in as values parsed incrementally from any split
// of the byte stream. The cluster bus is the only user; it needs no RESP3.

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
}

/// Incremental reply parser: `feed` bytes as they arrive, then `next()` until nil.
public struct RESPParser {
  private var buffer: [UInt8] = []
  private var start = 0
  /// Largest bulk string or array accepted: a corrupt length must not allocate.
  public let maxLength: Int

  public init(maxLength: Int = 512 * 1024 * 1024) { self.maxLength = maxLength }

  public mutating func feed<C: Collection>(_ bytes: C) where C.Element == UInt8 {
    if start > 0, start == buffer.count {
      buffer.removeAll(keepingCapacity: true)
      start = 0
    } else if start > 65_536, start * 2 > buffer.count {
      buffer.removeFirst(start)
      start = 0
    }
    buffer.append(contentsOf: bytes)
  }

  /// The next complete reply, nil if more bytes are needed.
  public mutating func next() throws(RESPError) -> RESPValue? {
    var i = start
    guard let value = try parse(&i) else { return nil }
    start = i
    return value
  }

  private func line(_ i: inout Int) -> ArraySlice<UInt8>? {
    var j = i
    while j + 1 < buffer.count {
      if buffer[j] == 13, buffer[j + 1] == 10 {
        let l = buffer[i..<j]
        i = j + 2
        return l
      }
      j += 1
    }
    return nil
  }

  private func integer(_ s: ArraySlice<UInt8>) throws(RESPError) -> Int64 {
    guard let v = Int64(String(decoding: s, as: UTF8.self)) else {
      throw RESPError(message: "bad integer in reply")
    }
    return v
  }

  private func parse(_ i: inout Int) throws(RESPError) -> RESPValue? {
    guard i < buffer.count else { return nil }
    let kind = buffer[i]
    var j = i + 1
    guard let l = line(&j) else { return nil }
    switch kind {
    case UInt8(ascii: "+"):
      i = j
      return .simple(String(decoding: l, as: UTF8.self))
    case UInt8(ascii: "-"):
      i = j
      return .error(String(decoding: l, as: UTF8.self))
    case UInt8(ascii: ":"):
      let v = try integer(l)
      i = j
      return .integer(v)
    case UInt8(ascii: "$"):
      let n = try integer(l)
      if n < 0 {
        i = j
        return .bulk(nil)
      }
      guard n <= maxLength else { throw RESPError(message: "bulk string too long") }
      let count = Int(n)
      guard buffer.count - j >= count + 2 else { return nil }
      let bytes = Array(buffer[j..<(j + count)])
      i = j + count + 2
      return .bulk(bytes)
    case UInt8(ascii: "*"):
      let n = try integer(l)
      if n < 0 {
        i = j
        return .array(nil)
      }
      guard n <= maxLength else { throw RESPError(message: "array too long") }
      var items: [RESPValue] = []
      items.reserveCapacity(Int(n))
      for _ in 0..<n {
        guard let item = try parse(&j) else { return nil }
        items.append(item)
      }
      i = j
      return .array(items)
    default:
      throw RESPError(message: "unknown reply type \(kind)")
    }
  }
}
