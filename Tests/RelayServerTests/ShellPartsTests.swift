import EventLoop
import RelayCore
import RelayWebSocket
import RelayProtocol
import Testing

@testable import RelayServer

@Suite struct FramingTests {
  /// One frame per event, decodable by a client, for every length form.
  @Test(arguments: [0, 1, 125, 126, 65_535, 65_536])
  func textFrameDecodesToThePayload(count: Int) {
    let bytes = [UInt8]((0..<count).map { UInt8(0x41 + $0 % 26) })
    let frame = Framing.textFrame(Payload(bytes))
    let copy = frame.withUnsafeBytes { Array($0) }
    var client = WebSocketConnection(role: .client, maxMessageBytes: 1 << 20)
    var got: [UInt8]?
    client.receive(copy) { if case .text(let t) = $0 { got = t } }
    #expect(got == bytes)
  }
}

@Suite struct ServerConfigTests {
  @Test func loopbackDetection() {
    #expect(ServerConfig.isLoopback("127.0.0.1"))
    #expect(ServerConfig.isLoopback("127.1.2.3"))
    #expect(ServerConfig.isLoopback("::1"))
    #expect(!ServerConfig.isLoopback("0.0.0.0"))
    #expect(!ServerConfig.isLoopback("::"))
    #expect(!ServerConfig.isLoopback("10.0.0.1"))
  }
}

@Suite struct TokenLifetimeTests {
  /// Only an integer literal in 1...maxTTLMs is a lifetime; everything else is refused
  /// instead of silently becoming the default.
  @Test(arguments: ["1.5", "1e308", "1e3", "9223372036854775808", "9223372036854775807", "0", "-1", "315360000001", "\"60000\"", "null", "true"])
  func refusedLifetimes(text: String) throws {
    let value = try JSONParser.parse(Array(text.utf8))
    #expect(Tokens.validTTL(value) == nil)
  }

  @Test(arguments: [("1", Int64(1)), ("60000", 60_000), ("315360000000", Tokens.maxTTLMs)])
  func acceptedLifetimes(text: String, ms: Int64) throws {
    #expect(Tokens.validTTL(try JSONParser.parse(Array(text.utf8))) == ms)
  }

  /// `now + ttl` saturates: minting never traps, whatever it is given.
  @Test func mintingSaturatesInsteadOfOverflowing() throws {
    let token = Tokens.mint(secret: "k", sub: "a", ttlMs: .max, nowWallMs: 1_700_000_000_000)
    let verifier = Tokens.verifier(secret: "k")
    #expect(verifier(token, 1_700_000_000_000)?.uid == "a")
    _ = Tokens.mint(secret: "k", sub: "a", ttlMs: .min, nowWallMs: .max)
  }
}
