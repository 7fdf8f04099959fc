// HTTP/1.x request head parsing (RFC 7230 §3) with limits.

import Testing

@testable import RelayWebSocket
import RelayPrimitives

let upgradeRequest =
  "GET /v1/ws?token=abc HTTP/1.1\r\nHost: example.com\r\nUpgrade: websocket\r\n"
  + "Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
  + "Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: chat, relay.v1\r\n\r\n"

/// Feeds `text` split as asked; returns the first non-needMore result.
func parse(_ text: String, split: Split = .whole, maxHeadBytes: Int = 8192) -> (
  HTTPHeadParseResult, HTTPHeadParser
) {
  parse(Array(text.utf8), split: split, maxHeadBytes: maxHeadBytes)
}

func parse(_ bytes: [UInt8], split: Split = .whole, maxHeadBytes: Int = 8192) -> (
  HTTPHeadParseResult, HTTPHeadParser
) {
  var parser = HTTPHeadParser(maxHeadBytes: maxHeadBytes)
  var chunks: [[UInt8]] = []
  switch split {
  case .whole: chunks = [bytes]
  case .byteByByte: chunks = bytes.map { [$0] }
  case .random(let seed):
    var rng = SeededRandom(state: seed)
    var start = 0
    while start < bytes.count {
      let length = Int.random(in: 1...min(bytes.count - start, 40), using: &rng)
      chunks.append(Array(bytes[start..<start + length]))
      start += length
    }
  }
  for chunk in chunks {
    let result = parser.feed(chunk)
    if case .needMore = result { continue }
    return (result, parser)
  }
  return (.needMore, parser)
}

func status(_ result: HTTPHeadParseResult) -> Int? {
  if case .invalid(let status) = result { return status }
  return nil
}

func head(_ result: HTTPHeadParseResult) -> HTTPRequestHead? {
  if case .complete(let head, _) = result { return head }
  return nil
}

@Suite struct HTTPHeadParserTests {
  @Test(arguments: allSplits)
  func parsesAnUpgradeRequestUnderEverySplit(split: Split) throws {
    let (result, _) = parse(upgradeRequest, split: split)
    let request = try #require(head(result))
    #expect(request.method == "GET")
    #expect(request.target == "/v1/ws?token=abc")
    #expect(request.path == "/v1/ws")
    #expect(request.versionMinor == 1)
    #expect(request.headers.count == 6)
    #expect(request.header("host") == "example.com")
    #expect(request.header("SEC-WEBSOCKET-KEY") == "dGhlIHNhbXBsZSBub25jZQ==")
    #expect(request.headerValues("sec-websocket-protocol") == ["chat", "relay.v1"])
    #expect(request.header("missing") == nil)
  }

  @Test func reportsBodyStartAndLeftover() {
    let frameBytes: [UInt8] = [0x81, 0x80, 1, 2, 3, 4]
    var parser = HTTPHeadParser()
    let result = parser.feed(Array(upgradeRequest.utf8) + frameBytes)
    guard case .complete(_, let bodyStart) = result else {
      Issue.record("not complete: \(result)")
      return
    }
    #expect(bodyStart == upgradeRequest.utf8.count)
    #expect(parser.leftover == frameBytes)
    _ = parser.feed([9])
    #expect(parser.leftover == frameBytes + [9])
  }

  @Test func valuesAreTrimmedAndListsSplit() throws {
    let text =
      "GET / HTTP/1.1\r\nHost:h\r\nConnection:  keep-alive ,\tUpgrade\t\r\nX: a\r\nx: b, ,c\r\n\r\n"
    let request = try #require(head(parse(text).0))
    #expect(request.header("connection") == "keep-alive ,\tUpgrade")
    #expect(request.headerValues("Connection") == ["keep-alive", "Upgrade"])
    #expect(request.headerValues("x") == ["a", "b", "c"])
    #expect(request.header("Host") == "h")
  }

  @Test func leadingEmptyLinesAreIgnored() throws {
    for split in allSplits {
      let request = try #require(
        head(parse("\r\n\r\n" + upgradeRequest, split: split).0), "\(split)")
      #expect(request.path == "/v1/ws")
    }
  }

  @Test func absoluteFormAndOtherTargets() {
    #expect(HTTPRequestHead.path(of: "http://example.com/a/b?q=1") == "/a/b")
    #expect(HTTPRequestHead.path(of: "http://example.com") == "/")
    #expect(HTTPRequestHead.path(of: "*") == "*")
    #expect(HTTPRequestHead.path(of: "/x?y?z") == "/x")
  }

  @Test func http10AndHigherMinorVersionsParse() {
    #expect(head(parse("GET / HTTP/1.0\r\n\r\n").0)?.versionMinor == 0)
    #expect(head(parse("GET / HTTP/1.1\r\n\r\n").0)?.versionMinor == 1)
  }

  @Test(arguments: [
    "HTTP/2.0", "HTTP/0.9", "HTTP/3.0",
  ])
  func otherMajorVersionsAre505(version: String) {
    #expect(status(parse("GET / \(version)\r\nHost: h\r\n\r\n").0) == 505)
  }

  @Test(arguments: [
    "GET / HTTP/1.1 \r\n\r\n",  // extra space
    "GET  / HTTP/1.1\r\n\r\n",  // double space
    "GET /\r\n\r\n",  // HTTP/0.9 shape
    "GET / HTTP/11\r\n\r\n", "GET / http/1.1\r\n\r\n", "GET / HTTP/1.1.1\r\n\r\n",
    "G(T / HTTP/1.1\r\n\r\n",  // non-token method
    "GET /a\u{7F}b HTTP/1.1\r\n\r\n",  // DEL in target
    "GET / HTTP/1.1\r\nHost h\r\n\r\n",  // no colon
    "GET / HTTP/1.1\r\nHost : h\r\n\r\n",  // space before colon
    "GET / HTTP/1.1\r\nHost\t: h\r\n\r\n",
    "GET / HTTP/1.1\r\n: h\r\n\r\n",  // empty name
    "GET / HTTP/1.1\r\nHo@st: h\r\n\r\n",  // non-token name
    "GET / HTTP/1.1\r\nHost: h\r\n folded\r\n\r\n",  // obs-fold
    "GET / HTTP/1.1\r\nHost: h\r\n\tfolded\r\n\r\n",
    "GET / HTTP/1.1\r\nX: a\u{0}b\r\n\r\n",  // NUL in value
    "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n",  // bare CR
    "GET / HTTP/1.1\r\nX: a\nY: b\r\n\r\n",  // bare LF
    "\u{16}\u{3}\u{1}\u{2}\u{0}",  // TLS ClientHello on the plain port: 400 at once
    "hello world\r\n\r\n", "\r\n\r\n\r\nfoo\r\n\r\n",
  ])
  func malformedHeadsAre400(text: String) {
    for split in [Split.whole, .byteByByte] {
      #expect(status(parse(text, split: split).0) == 400, "\(split): \(text.debugDescription)")
    }
  }

  @Test func garbageFailsBeforeTheHeadEnds() {
    var parser = HTTPHeadParser()
    #expect(status(parser.feed(Array("GET / HTTP/1.1\r".utf8))) == nil)
    #expect(status(parser.feed([0x00])) == 400)
    var other = HTTPHeadParser()
    #expect(status(other.feed(Array("GET /\u{1} HT".utf8))) == 400)
  }

  @Test func headOverTheLimitIs431() {
    let big = "GET / HTTP/1.1\r\nX: " + String(repeating: "a", count: 9000) + "\r\n\r\n"
    #expect(status(parse(big).0) == 431)
    #expect(status(parse(big, split: .random(seed: 4)).0) == 431)
    // Never terminated: 431 as soon as the limit is passed.
    var parser = HTTPHeadParser(maxHeadBytes: 8192)
    let line = Array("X: \(String(repeating: "b", count: 100))\r\n".utf8)
    var result = parser.feed(Array("GET / HTTP/1.1\r\n".utf8))
    var fed = 16
    while case .needMore = result, fed < 9000 {
      result = parser.feed(line)
      fed += line.count
    }
    #expect(status(result) == 431)
    #expect(fed > 8192 && fed < 8192 + line.count + 1)
  }

  @Test func headExactlyAtTheLimitIsAccepted() {
    let prefix = "GET / HTTP/1.1\r\nX: "
    let filler = String(repeating: "c", count: 8192 - prefix.utf8.count - 4)
    let text = prefix + filler + "\r\n\r\n"
    #expect(text.utf8.count == 8192)
    #expect(head(parse(text).0) != nil)
    #expect(status(parse(prefix + filler + "c\r\n\r\n").0) == 431)
  }

  @Test func resultIsStickyAfterCompletion() {
    var parser = HTTPHeadParser()
    _ = parser.feed(Array("GET / HTTP/1.1\r\n\r\nrest".utf8))
    #expect(head(parser.feed(Array("more".utf8)))?.path == "/")
    parser.reset()
    // The carried "restmore" begins the next request-line.
    #expect(head(parser.feed(Array(" / HTTP/1.1\r\n\r\n".utf8)))?.method == "restmore")
  }

  @Test func responsesCarryLengthAndClose() {
    let bytes = HTTPResponse.make(
      status: 404, headers: [("Content-Type", "text/plain")], body: Array("nope".utf8), close: true)
    #expect(
      String(decoding: bytes, as: UTF8.self)
        == "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 4\r\nConnection: close\r\n\r\nnope"
    )
    let noBody = HTTPResponse.make(status: 204)
    #expect(String(decoding: noBody, as: UTF8.self) == "HTTP/1.1 204 No Content\r\n\r\n")
  }
}

@Suite struct ContentLengthTests {
  static func head(_ values: [String]) -> HTTPRequestHead {
    HTTPRequestHead(method: "POST", target: "/", versionMinor: 1, headers: values.map { ("Content-Length", $0) })
  }

  @Test func digitsOnlyOnceAndInRange() {
    #expect(Self.head([]).contentLength == 0)
    #expect(Self.head(["12"]).contentLength == 12)
    #expect(Self.head(["999999999999999999"]).contentLength == 999_999_999_999_999_999)
    for bad in ["+5", "-1", "1 2", "", "0x10", "9223372036854775808", "99999999999999999999999", "1.0"] {
      #expect(Self.head([bad]).contentLength == nil, "\(bad)")
    }
    #expect(Self.head(["5", "5"]).contentLength == nil)  // repeated: smuggling ground
  }
}
