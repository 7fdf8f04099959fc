// Long seeded conversations: many messages of varied sizes, fragmented at
// random, with control frames interleaved, through one connection (storage
// reuse, validator reset), under every split and both receive APIs.

import Testing

@testable import RelayWebSocket
import RelayPrimitives

/// A random valid stream and the events it must produce.
func randomConversation(seed: UInt64, sender: WebSocketRole, messages: Int) -> (
  [UInt8], [WebSocketEvent]
) {
  var rng = SeededRandom(state: seed)
  var wire: [UInt8] = []
  var expected: [WebSocketEvent] = []
  let texts = [
    "", "a", "κόσμε", "\u{1F600}\u{1F601}", "plain ascii text that is longer", "ü\u{10FFFF}",
  ]
  for _ in 0..<messages {
    let isText = Bool.random(using: &rng)
    let size = [0, 1, 7, 125, 126, 1000, 3000, 20_000, 65_536].randomElement(using: &rng)!
    var payload: [UInt8] = []
    if isText {
      while payload.count < size { payload += Array(texts.randomElement(using: &rng)!.utf8) }
    } else {
      payload = randomBytes(size, seed: rng.next())
    }
    let pieces = cutAtRandom(payload, pieces: Int.random(in: 1...5, using: &rng), rng: &rng)
    for (index, piece) in pieces.enumerated() {
      let opcode: UInt8 = index == 0 ? (isText ? 0x1 : 0x2) : 0x0
      wire += frame(opcode, piece, fin: index == pieces.count - 1, from: sender)
      if index == pieces.count - 1 { expected.append(isText ? .text(payload) : .binary(payload)) }
      if Int.random(in: 0..<4, using: &rng) == 0 {
        let ping = randomBytes(Int.random(in: 0...125, using: &rng), seed: rng.next())
        wire += frame(0x9, ping, from: sender)
        // Predicted unmasked; a client's masked pong is compared decoded.
        expected.append(.write(WebSocketFrame.encode(opcode: .pong, payload: ping)))
        expected.append(.ping(ping))
      }
    }
  }
  return (wire, expected)
}

/// Cuts `bytes` into `pieces` parts (some possibly empty), at byte
/// positions that ignore character boundaries.
func cutAtRandom(_ bytes: [UInt8], pieces: Int, rng: inout SeededRandom) -> [[UInt8]] {
  var cuts = (1..<pieces).map { _ in Int.random(in: 0...bytes.count, using: &rng) }.sorted()
  cuts = [0] + cuts + [bytes.count]
  return (0..<pieces).map { Array(bytes[cuts[$0]..<cuts[$0 + 1]]) }
}

/// A short description of an event (messages can be megabytes long).
func summary(_ event: WebSocketEvent) -> String {
  switch event {
  case .text(let bytes): return "text(\(bytes.count) bytes)"
  case .binary(let bytes): return "binary(\(bytes.count) bytes)"
  case .ping(let bytes): return "ping(\(bytes.count))"
  case .pong(let bytes): return "pong(\(bytes.count))"
  case .write(let bytes): return "write(\(hex(Array(bytes.prefix(8))))…, \(bytes.count))"
  case .closed(let code, let reason, let byPeer): return "closed(\(code), \(reason), \(byPeer))"
  }
}

/// Compares event lists; reports the first difference compactly. Client
/// pongs are masked with generated keys, so `.write`s are compared decoded.
func expectSameEvents(
  _ got: [WebSocketEvent], _ expected: [WebSocketEvent], _ label: String,
  sourceLocation: SourceLocation = #_sourceLocation
) {
  for (index, (a, b)) in zip(got, expected).enumerated() where !sameEvent(a, b) {
    Issue.record(
      "\(label): event \(index) is \(summary(a)), expected \(summary(b))",
      sourceLocation: sourceLocation)
    return
  }
  #expect(got.count == expected.count, "\(label)", sourceLocation: sourceLocation)
}

func sameEvent(_ a: WebSocketEvent, _ b: WebSocketEvent) -> Bool {
  guard case .write(let bytes) = a, case .write(let want) = b, bytes[1] & 0x80 != 0 else {
    return a == b
  }
  var server = WebSocketConnection(role: .server)
  return bytes[0] == want[0]
    && feed(&server, bytes, split: .whole) == [.pong(Array(want.dropFirst(2)))]
}

@Suite struct StreamTests {
  @Test(arguments: [
    (UInt64(1), WebSocketRole.client), (2, .client), (3, .client), (4, .server), (5, .server),
  ])
  func aLongConversationUnderSeveralSplitsAndBothAPIs(seed: UInt64, sender: WebSocketRole) {
    let (wire, expected) = randomConversation(seed: seed, sender: sender, messages: 30)
    let receiver: WebSocketRole = sender == .client ? .server : .client
    for split in bigSplits + [.random(seed: seed)] {
      var connection = WebSocketConnection(role: receiver, maxMessageBytes: 1 << 20)
      expectSameEvents(feed(&connection, wire, split: split), expected, "\(split)")
      var borrowing = WebSocketConnection(role: receiver, maxMessageBytes: 1 << 20)
      expectSameEvents(
        feedBorrowing(&borrowing, wire, split: split), expected, "borrowing \(split)")
      var overwriting = WebSocketConnection(role: receiver, maxMessageBytes: 1 << 20)
      expectSameEvents(
        feedOverwriting(&overwriting, wire, split: split), expected, "overwriting \(split)")
    }
  }

  @Test func aMessageWhollyInOneReadLeavesNoStorageWhenUnmaskedInPlace() {
    var connection = WebSocketConnection(role: .server)
    let message = Array(#"{"type":"session.join","session":"room"}"#.utf8)
    let got = feedOverwriting(&connection, frame(0x1, message), split: .whole)
    #expect(got == [.text(message)])
    #expect(connection.storage.isEmpty)
  }

  @Test func smallConversationByteByByte() {
    let (wire, expected) = randomConversation(seed: 99, sender: .client, messages: 8)
    var connection = WebSocketConnection(role: .server, maxMessageBytes: 1 << 20)
    expectSameEvents(feed(&connection, wire, split: .byteByByte), expected, "byte-by-byte")
  }

  @Test func storageIsReleasedAfterALargeMessage() {
    var connection = WebSocketConnection(role: .server)
    _ = feed(&connection, frame(0x2, randomBytes(60_000, seed: 1)), split: .whole)
    #expect(connection.storage.isEmpty)
    _ = feed(&connection, frame(0x2, randomBytes(1_000, seed: 2)), split: .whole)
    #expect(
      connection.storage.count >= 1_000
        && connection.storage.count <= WebSocketConnection.retainedStorageBytes)
  }
}
