// The opening handshake (RFC 6455 §4.2).

import Testing

@testable import RelayWebSocket
import RelayPrimitives

func request(
  method: String = "GET", version: String = "HTTP/1.1", omit: Set<String> = [],
  replace: [String: String] = [:], extra: [(String, String)] = []
) -> HTTPRequestHead {
  var fields: [(String, String)] = [
    ("Host", "server.example.com"), ("Upgrade", "websocket"), ("Connection", "Upgrade"),
    ("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="), ("Sec-WebSocket-Version", "13"),
  ]
  fields = fields.filter { !omit.contains($0.0) }.map { ($0.0, replace[$0.0] ?? $0.1) } + extra
  var text = "\(method) /v1/ws \(version)\r\n"
  for (name, value) in fields { text += "\(name): \(value)\r\n" }
  text += "\r\n"
  var parser = HTTPHeadParser()
  guard case .complete(let head, _) = parser.feed(Array(text.utf8)) else {
    fatalError("bad test request")
  }
  return head
}

func evaluate(
  _ head: HTTPRequestHead, supported: [String] = ["relay.v1"], refuse: Bool = true
) -> HandshakeResult {
  WebSocketHandshake.evaluate(
    head, supportedSubprotocols: supported, refuseUnsupportedOffer: refuse, sha1: testSHA1)
}

func rejection(_ result: HandshakeResult) -> (status: Int, text: String)? {
  guard case .reject(let status, let response) = result else { return nil }
  return (status, String(decoding: response, as: UTF8.self))
}

@Suite struct HandshakeTests {
  @Test func testSHA1MatchesKnownDigests() {
    #expect(hex(testSHA1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    #expect(hex(testSHA1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
    #expect(
      hex(testSHA1(Array(String(repeating: "a", count: 1000).utf8)))
        == "291e9a6c66994949b57ba5e650361e98fc36b1ba")
  }

  @Test func rfcExampleAcceptValue() {
    // RFC 6455 §1.3.
    #expect(
      WebSocketHandshake.acceptValue(forKey: "dGhlIHNhbXBsZSBub25jZQ==", sha1: testSHA1)
        == "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=")
  }

  @Test func acceptsAndBuilds101() {
    guard case .accept(let response, let subprotocol) = evaluate(request()) else {
      Issue.record("rejected")
      return
    }
    #expect(subprotocol == nil)
    #expect(
      String(decoding: response, as: UTF8.self)
        == "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        + "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n")
  }

  @Test func tokensAreCaseInsensitiveAndListsAllowed() {
    let head = request(replace: ["Upgrade": "WebSocket", "Connection": "keep-alive, UPGRADE"])
    guard case .accept = evaluate(head) else {
      Issue.record("rejected: \(String(describing: rejection(evaluate(head))))")
      return
    }
  }

  @Test func selectsTheFirstSupportedOfferedSubprotocol() {
    let head = request(extra: [
      ("Sec-WebSocket-Protocol", "chat, relay.v1"), ("Sec-WebSocket-Protocol", "relay.v2"),
    ])
    guard
      case .accept(let response, let subprotocol) = evaluate(
        head, supported: ["relay.v2", "relay.v1"])
    else {
      Issue.record("rejected")
      return
    }
    #expect(subprotocol == "relay.v1")
    #expect(
      String(decoding: response, as: UTF8.self).contains("\r\nSec-WebSocket-Protocol: relay.v1\r\n")
    )
  }

  @Test func unsupportedOfferIsRefusedOrIgnored() {
    let head = request(extra: [("Sec-WebSocket-Protocol", "chat")])
    #expect(rejection(evaluate(head))?.status == 400)
    guard case .accept(let response, let subprotocol) = evaluate(head, supported: [], refuse: false)
    else {
      Issue.record("echo endpoint must ignore offers")
      return
    }
    #expect(subprotocol == nil)
    #expect(!String(decoding: response, as: UTF8.self).contains("Sec-WebSocket-Protocol"))
  }

  @Test func extensionsAreIgnored() {
    let head = request(extra: [
      ("Sec-WebSocket-Extensions", "permessage-deflate; client_max_window_bits")
    ])
    guard case .accept(let response, _) = evaluate(head) else {
      Issue.record("rejected")
      return
    }
    #expect(!String(decoding: response, as: UTF8.self).contains("Extensions"))
  }

  @Test func nonGetIs405WithAllow() {
    let result = rejection(evaluate(request(method: "POST")))
    #expect(result?.status == 405)
    #expect(result?.text.hasPrefix("HTTP/1.1 405 Method Not Allowed\r\n") == true)
    #expect(result?.text.contains("\r\nAllow: GET\r\n") == true)
    #expect(result?.text.contains("\r\nConnection: close\r\n") == true)
  }

  @Test func http10Is400() {
    #expect(rejection(evaluate(request(version: "HTTP/1.0")))?.status == 400)
  }

  @Test func missingOrDuplicateHostIs400() {
    #expect(rejection(evaluate(request(omit: ["Host"])))?.status == 400)
    #expect(rejection(evaluate(request(extra: [("Host", "other")])))?.status == 400)
  }

  @Test func missingUpgradeIs426WithUpgradeHeader() {
    let result = rejection(evaluate(request(omit: ["Upgrade"])))
    #expect(result?.status == 426)
    #expect(result?.text.contains("\r\nUpgrade: websocket\r\n") == true)
  }

  @Test(arguments: ["h2c", "websockets", ""])
  func upgradeWithoutWebsocketTokenIs400(value: String) {
    #expect(rejection(evaluate(request(replace: ["Upgrade": value])))?.status == 400)
  }

  @Test(arguments: [
    ("keep-alive, Upgrade", true), ("upgrade", true), ("  UPGRADE\t", true), (",upgrade,", true),
    ("keep-alive,,\tupgrade", true), ("upgrades", false), ("up grade", false), ("keep-alive", false),
    ("", false), (",", false), ("upgrad", false),
  ])
  func connectionTokenListIsScannedInPlace(value: String, upgrades: Bool) {
    #expect((rejection(evaluate(request(replace: ["Connection": value])))?.status != 400) == upgrades)
  }

  @Test func connectionWithoutUpgradeTokenIs400() {
    #expect(rejection(evaluate(request(replace: ["Connection": "keep-alive"])))?.status == 400)
    #expect(rejection(evaluate(request(omit: ["Connection"])))?.status == 400)
  }

  @Test(arguments: ["8", "12", "14", "13, 8", "", "abc"])
  func otherVersionsAre426WithVersionHeader(version: String) {
    let result = rejection(evaluate(request(replace: ["Sec-WebSocket-Version": version])))
    #expect(result?.status == 426)
    #expect(result?.text.contains("\r\nSec-WebSocket-Version: 13\r\n") == true)
  }

  @Test func missingVersionIs426() {
    #expect(rejection(evaluate(request(omit: ["Sec-WebSocket-Version"])))?.status == 426)
  }

  @Test(arguments: [
    "", "dGhlIHNhbXBsZSBub25jZQ", "dGhlIHNhbXBsZSBub25jZQ=", "dGhlIHNhbXBsZSBub25j",  // 12 bytes
    "dGhlIHNhbXBsZSBub25jZWVl",  // 18 bytes
    "dGhlIHNhbXBsZSBub25jZR==",  // non-canonical last bits
    "dGhlIHNhbXBsZSBub25j*Q==", "dGhl IHNhbXBsZSBub25jZQ==",
  ])
  func badKeysAre400(key: String) {
    #expect(rejection(evaluate(request(replace: ["Sec-WebSocket-Key": key])))?.status == 400)
  }

  @Test func missingOrRepeatedKeyIs400() {
    #expect(rejection(evaluate(request(omit: ["Sec-WebSocket-Key"])))?.status == 400)
    #expect(
      rejection(evaluate(request(extra: [("Sec-WebSocket-Key", "AAAAAAAAAAAAAAAAAAAAAA==")])))?
        .status == 400)
  }
}
