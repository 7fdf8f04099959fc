import Testing

@testable import RelayCluster

@Suite struct RESPTests {
  @Test func encodesCommandsAsBulkArrays() {
    #expect(RESP.command("GET", "k") == Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".utf8))
    #expect(RESP.command([[0, 13, 10]]) == [42, 49, 13, 10, 36, 51, 13, 10, 0, 13, 10, 13, 10])
  }

  /// A payload sent apart: head + payload + tail is the command with it in place.
  @Test func encodesACommandAroundAPayload() {
    let before = [Array("SET".utf8), Array("k".utf8)]
    let after = [Array("EX".utf8), Array("600".utf8)]
    let payload: [UInt8] = [0, 13, 10, 255]
    let parts = RESP.command(before, payloadCount: payload.count, after: after)
    #expect(parts.head + payload + parts.tail == RESP.command(before + [payload] + after))
    let last = RESP.command([Array("APPEND".utf8)], payloadCount: 0, after: [])
    #expect(last.head + last.tail == RESP.command([Array("APPEND".utf8), []]))
  }

  @Test func parsesEveryReplyTypeAtEverySplit() throws {
    let stream = Array("+OK\r\n-ERR no\r\n:42\r\n$-1\r\n*-1\r\n$5\r\nab\r\nc\r\n*2\r\n*1\r\n:1\r\n$0\r\n\r\n".utf8)
    let expected: [RESPValue] = [
      .simple("OK"), .error("ERR no"), .integer(42), .bulk(nil), .array(nil), .bulk(Array("ab\r\nc".utf8)),
      .array([.array([.integer(1)]), .bulk([])]),
    ]
    for split in 0...stream.count {
      var parser = RESPParser()
      var got: [RESPValue] = []
      parser.feed(stream[..<split])
      while let v = try parser.next() { got.append(v) }
      parser.feed(stream[split...])
      while let v = try parser.next() { got.append(v) }
      #expect(got == expected, "split at \(split)")
    }
    var byteByByte = RESPParser()
    var got: [RESPValue] = []
    for b in stream {
      byteByByte.feed([b])
      while let v = try byteByByte.next() { got.append(v) }
    }
    #expect(got == expected)
  }

  @Test func refusesGarbageAndHugeLengths() {
    var bad = RESPParser()
    bad.feed(Array("?what\r\n".utf8))
    #expect(throws: RESPError.self) { try bad.next() }
    var huge = RESPParser(maxLength: 10)
    huge.feed(Array("$11\r\n".utf8))
    #expect(throws: RESPError.self) { try huge.next() }
    var notNumber = RESPParser()
    notNumber.feed(Array(":x\r\n".utf8))
    #expect(throws: RESPError.self) { try notNumber.next() }
  }
}

/// The incremental parser against hostile and fragmented input: every split point,
/// nesting and size bounds, and linear work however the bytes arrive.
@Suite struct RESPIncrementalTests {
  /// Every value of `stream`, fed in pieces cut at `cuts`, or the error that ended it.
  static func parse(_ stream: [UInt8], cuts: [Int], parser: RESPParser = RESPParser()) -> ([RESPValue], RESPError?) {
    var parser = parser
    var got: [RESPValue] = []
    var from = 0
    do {
      for cut in cuts + [stream.count] where cut >= from {
        parser.feed(stream[from..<cut])
        from = cut
        while let v = try parser.next() { got.append(v) }
      }
    } catch {
      return (got, error)
    }
    return (got, nil)
  }

  static let replies: [(String, RESPValue)] = [
    ("+OK\r\n", .simple("OK")),
    ("-WRONGTYPE Operation against a key\r\n", .error("WRONGTYPE Operation against a key")),
    (":-9223372036854775808\r\n", .integer(.min)),
    (":+12\r\n", .integer(12)),
    ("$0\r\n\r\n", .bulk([])),
    ("$4\r\n\r\n\r\n\r\n", .bulk([13, 10, 13, 10])),
    ("*0\r\n", .array([])),
    ("*-1\r\n", .array(nil)),
    ("$-1\r\n", .bulk(nil)),
    (
      "*1\r\n*2\r\n$6\r\nstream\r\n*2\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nk\r\n$1\r\nv\r\n*2\r\n$3\r\n2-0\r\n*0\r\n",
      .array([
        .array([
          .bulk(Array("stream".utf8)),
          .array([
            .array([.bulk(Array("1-0".utf8)), .array([.bulk([107]), .bulk([118])])]),
            .array([.bulk(Array("2-0".utf8)), .array([])]),
          ]),
        ])
      ])
    ),
    ("*3\r\n:1\r\n*-1\r\n+x\r\n", .array([.integer(1), .array(nil), .simple("x")])),
  ]

  @Test func parsesEveryReplyAtEveryPairOfSplitPoints() {
    let stream = Array(Self.replies.map(\.0).joined().utf8)
    let expected = Self.replies.map(\.1)
    for a in 0...stream.count {
      for b in stride(from: a, through: stream.count, by: 7) {
        let (got, error) = Self.parse(stream, cuts: [a, b])
        #expect(error == nil && got == expected, "cuts at \(a), \(b)")
      }
    }
    let (byteWise, error) = Self.parse(stream, cuts: Array(0...stream.count))
    #expect(error == nil && byteWise == expected)
  }

  @Test func refusesNestingDeeperThanTheBound() {
    let ok = String(repeating: "*1\r\n", count: 8) + ":1\r\n"
    let (got, error) = Self.parse(Array(ok.utf8), cuts: [])
    #expect(error == nil && got.count == 1)
    // A hostile stream of a million nested arrays fails at the ninth, fed byte by
    // byte or whole, without recursion.
    let deep = Array(String(repeating: "*1\r\n", count: 1_000_000).utf8)
    #expect(Self.parse(deep, cuts: []).1 == RESPError(message: "arrays nested too deep"))
    #expect(Self.parse(Array(deep[..<40]), cuts: Array(0..<40)).1 == RESPError(message: "arrays nested too deep"))
    let emptyTooDeep = String(repeating: "*1\r\n", count: 8) + "*0\r\n"
    #expect(Self.parse(Array(emptyTooDeep.utf8), cuts: []).1 != nil)
  }

  @Test func refusesHugeDeclaredSizesWithoutAllocating() throws {
    // Past the bound: refused at the header.
    for header in ["*9223372036854775807\r\n", "$9223372036854775807\r\n", "*99999999999999999999\r\n", "$-2\r\n"] {
      #expect(Self.parse(Array(header.utf8), cuts: []).1 != nil, "\(header)")
    }
    // Within the bound: a count of 500 million reserves nothing up front (it would
    // need gigabytes) and the parser simply waits for elements that never come.
    var parser = RESPParser()
    parser.feed(Array("*500000000\r\n:1\r\n:2\r\n".utf8))
    #expect(try parser.next() == nil)
    // A bulk string's bytes count toward the reply's bound before they arrive.
    var small = RESPParser(maxLength: 100)
    small.feed(Array("*2\r\n$100\r\n".utf8) + [UInt8](repeating: 0, count: 100) + Array("\r\n$100\r\n".utf8))
    #expect(throws: RESPError(message: "reply too long")) { try small.next() }
  }

  @Test func refusesMalformedFraming() {
    for bad in ["$3\r\nabcd\r\n", ":\r\n", ":1x\r\n", ":99999999999999999999\r\n", "*1\r\n?\r\n", "+ok\n\n"] {
      let (_, error) = Self.parse(Array(bad.utf8) + Array(repeating: 10, count: 70_000), cuts: [])
      #expect(error != nil, "\(bad)")
    }
    // A line that never ends is refused once it passes the line bound.
    let endless = [UInt8(ascii: "+")] + [UInt8](repeating: 65, count: RESPParser.maxLineLength + 2)
    #expect(Self.parse(endless, cuts: Array(stride(from: 0, to: endless.count, by: 1000))).1 != nil)
    let longest = "+" + String(repeating: "A", count: RESPParser.maxLineLength) + "\r\n"
    #expect(Self.parse(Array(longest.utf8), cuts: [1000]).0.count == 1)
    // After an error, the parser keeps failing: the framing is lost.
    var parser = RESPParser()
    parser.feed(Array("?\r\n".utf8))
    #expect(throws: RESPError.self) { try parser.next() }
    parser.feed(Array("+OK\r\n".utf8))
    #expect(throws: RESPError.self) { try parser.next() }
  }

  @Test func parsesLargeRepliesInSmallChunksInLinearWork() throws {
    // 4 MiB bulk string in 1 KiB reads: parsing from the start at every read would
    // take ~8 billion steps.
    let body = [UInt8](repeating: 0x61, count: 4 << 20)
    let bulk = Array("$\(body.count)\r\n".utf8) + body + [13, 10]
    // An array of 100,000 integers in 1 KiB reads: re-parsing would take ~2 billion.
    let array = Array(("*100000\r\n" + String(repeating: ":12345\r\n", count: 100_000)).utf8)
    for stream in [bulk, array] {
      var parser = RESPParser()
      var replies = 0
      var from = 0
      while from < stream.count {
        let to = min(from + 1024, stream.count)
        parser.feed(stream[from..<to])
        from = to
        while try parser.next() != nil { replies += 1 }
      }
      #expect(replies == 1)
      #expect(parser.steps >= stream.count / 2 && parser.steps <= 2 * stream.count, "\(parser.steps) steps for \(stream.count) bytes")
    }
  }
}
