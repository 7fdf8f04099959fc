import Testing

@testable import RelayCluster

@Suite struct RESPTests {
  @Test func encodesCommandsAsBulkArrays() {
    #expect(RESP.command("GET", "k") == Array("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n".utf8))
    #expect(RESP.command([[0, 13, 10]]) == [42, 49, 13, 10, 36, 51, 13, 10, 0, 13, 10, 13, 10])
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
