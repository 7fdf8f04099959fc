// The client side of the opening handshake (RFC 6455 §4.1), checked
// against our own server side.

import Testing

@testable import RelayWebSocket

@Suite struct ClientHandshakeTests {
  let key: [UInt8] = Array("the sample nonce".utf8)  // RFC 6455 §1.3's key

  func serverAnswer(
    to request: [UInt8], supported: [String] = ["relay.v1"]
  ) -> [UInt8] {
    var parser = HTTPHeadParser()
    guard case .complete(let head, _) = parser.feed(request) else { return [] }
    let result = WebSocketHandshake.evaluate(
      head, supportedSubprotocols: supported, refuseUnsupportedOffer: true, sha1: testSHA1)
    switch result {
    case .accept(let response, _): return response
    case .reject(_, let response): return response
    }
  }

  @Test func requestIsAcceptedByOurServerAndTheAnswerValidates() {
    let (request, keyText) = WebSocketClientHandshake.request(
      host: "localhost:8080", target: "/v1/ws", key: key, subprotocols: ["relay.v1"])
    #expect(keyText == "dGhlIHNhbXBsZSBub25jZQ==")
    let frame: [UInt8] = [0x81, 0x01, 0x41]
    let response = serverAnswer(to: request) + frame
    for split in [1, 10, response.count - 3, response.count] {
      let outcome = WebSocketClientHandshake.evaluateResponse(
        Array(response.prefix(split)), key: keyText, offeredSubprotocols: ["relay.v1"],
        sha1: testSHA1)
      if split < response.count - 3 {
        #expect(outcome == .needMore)
      } else {
        let leftover = Array(frame.prefix(split - (response.count - 3)))
        #expect(outcome == .accepted(subprotocol: "relay.v1", leftover: leftover))
      }
    }
  }

  @Test func refusalsAreReported() {
    let (request, keyText) = WebSocketClientHandshake.request(
      host: "h", target: "/v1/ws", key: key, subprotocols: ["chat"])
    let outcome = WebSocketClientHandshake.evaluateResponse(
      serverAnswer(to: request), key: keyText, offeredSubprotocols: ["chat"], sha1: testSHA1)
    #expect(outcome == .refused(status: 400, reason: "not upgraded"))
  }

  @Test(arguments: [
    (
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=", "Upgrade: h2c",
      "Upgrade is not websocket"
    ),
    (
      "Sec-WebSocket-Accept: AAAAAAAAAAAAAAAAAAAAAAAAAAA=", "Upgrade: websocket",
      "wrong Sec-WebSocket-Accept"
    ),
    (
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Protocol: other",
      "Upgrade: websocket", "unoffered subprotocol"
    ),
    (
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\nSec-WebSocket-Extensions: x",
      "Upgrade: websocket", "unrequested extension"
    ),
  ])
  func badResponsesAreRefused(accept: String, upgrade: String, reason: String) {
    let text =
      "HTTP/1.1 101 Switching Protocols\r\n\(upgrade)\r\nConnection: Upgrade\r\n\(accept)\r\n\r\n"
    let outcome = WebSocketClientHandshake.evaluateResponse(
      Array(text.utf8), key: "dGhlIHNhbXBsZSBub25jZQ==", sha1: testSHA1)
    #expect(outcome == .refused(status: 0, reason: reason))
  }

  @Test func garbageAndOversizedHeadsAreRefused() {
    let garbage = WebSocketClientHandshake.evaluateResponse(
      Array("SSH-2.0-OpenSSH\r\n\r\n".utf8), key: "k", sha1: testSHA1)
    #expect(garbage == .refused(status: 0, reason: "bad status line"))
    let endless = [UInt8](repeating: 0x41, count: 9000)
    let big = WebSocketClientHandshake.evaluateResponse(endless, key: "k", sha1: testSHA1)
    #expect(big == .refused(status: 0, reason: "head too large"))
  }
}
