// The closing handshake (RFC 6455 §5.5.1, §7) and close code validity
// (§7.4; the table in `CloseCode.isValidReceived`).

import Testing

@testable import RelayWebSocket
import RelayPrimitives

let validCloseCodes: [UInt16] = [
  1000, 1001, 1002, 1003, 1007, 1008, 1009, 1010, 1011, 1012, 1013, 1014, 3000, 3999, 4000, 4999,
]
let invalidCloseCodes: [UInt16] = [
  0, 1, 999, 1004, 1005, 1006, 1015, 1016, 1100, 2000, 2999, 5000, 65535,
]

@Suite struct CloseTests {
  @Test(arguments: validCloseCodes)
  func validPeerCloseIsEchoedWithTheSameCode(code: UInt16) {
    let got = events(closeFrame(code: code, reason: Array("bye".utf8)))
    #expect(
      got == [
        .write([0x88, 0x02, UInt8(code >> 8), UInt8(code & 0xFF)]),
        .closed(code: code, reason: "bye", initiatedByPeer: true),
      ])
  }

  @Test(arguments: invalidCloseCodes)
  func invalidCloseCodeFails1002(code: UInt16) {
    expectFailure(events(closeFrame(code: code)), code: 1002)
  }

  @Test func everyCodeFollowsTheTable() {
    for code in 0...UInt16.max {
      let valid =
        (1000...1003).contains(code) || (1007...1014).contains(code) || (3000...4999).contains(code)
      #expect(CloseCode.isValidReceived(code) == valid, "\(code)")
    }
  }

  @Test func emptyCloseIsAnsweredWithAnEmptyClose() {
    #expect(
      events(frame(0x8, [])) == [
        .write([0x88, 0x00]), .closed(code: 1005, reason: "", initiatedByPeer: true),
      ])
  }

  @Test func oneBytePayloadFails1002() {
    expectFailure(events(frame(0x8, [0x03])), code: 1002)
  }

  @Test func invalidUTF8ReasonFails1007() {
    // Autobahn 7.5.1's reason: "κόσμε" then a surrogate, then "edited".
    let reason: [UInt8] = [
      0xCE, 0xBA, 0xE1, 0xBD, 0xB9, 0xCF, 0x83, 0xCE, 0xBC, 0xCE, 0xB5, 0xED, 0xA0, 0x80, 0x65,
      0x64, 0x69, 0x74, 0x65, 0x64,
    ]
    expectFailure(events(closeFrame(code: 1000, reason: reason)), code: 1007)
    expectFailure(events(closeFrame(code: 1000, reason: [0xC2])), code: 1007)
  }

  @Test func maximalReasonIsAccepted() {
    let reason = [UInt8](repeating: 0x2A, count: 123)
    #expect(
      events(closeFrame(code: 1000, reason: reason)).last
        == .closed(code: 1000, reason: String(repeating: "*", count: 123), initiatedByPeer: true))
  }

  @Test func closeBetweenFragmentsCompletesTheHandshake() {
    let input =
      frame(0x1, Array("part".utf8), fin: false) + closeFrame(code: 1000)
      + frame(0x0, Array("ignored".utf8))
    #expect(
      events(input) == [
        .write([0x88, 0x02, 0x03, 0xE8]), .closed(code: 1000, reason: "", initiatedByPeer: true),
      ])
  }

  @Test func dataAfterPeerCloseIsIgnored() {
    let input = closeFrame(code: 1001) + frame(0x1, Array("late".utf8)) + frame(0x9, [])
    #expect(events(input).count == 2)
  }

  @Test func clientRoleAnswersCloseWithAMaskedClose() {
    let got = clientEvents(closeFrame(code: 4000, from: .server))
    #expect(got.count == 2)
    if let first = got.first { #expect(closeCode(in: first) == 4000) }
    #expect(got.last == .closed(code: 4000, reason: "", initiatedByPeer: true))
  }

  // MARK: Closes we initiate (§7.1.2)

  @Test func weInitiateAndThePeerCompletes() {
    var connection = WebSocketConnection(role: .server)
    let sent = connection.close(code: 1001, reason: "shutdown")
    #expect(
      sent
        == WebSocketFrame.encode(
          opcode: .close, payload: WebSocketFrame.closePayload(code: 1001, reason: "shutdown")))
    #expect(connection.state == .closing)
    #expect(connection.close(code: 1000, reason: "again").isEmpty)
    let input =
      frame(0x1, Array("in flight".utf8)) + frame(0x2, [UInt8](repeating: 0, count: 70_000))
      + frame(0x9, [7]) + closeFrame(code: 1001)
    for split in allSplits {
      var copy = WebSocketConnection(role: .server)
      _ = copy.close(code: 1001, reason: "shutdown")
      #expect(
        feed(&copy, input, split: split) == [
          .ping([7]), .closed(code: 1001, reason: "", initiatedByPeer: false),
        ], "\(split)")
      #expect(copy.state == .closed)
    }
  }

  @Test func halfReceivedMessageIsDroppedWhenWeClose() {
    var connection = WebSocketConnection(role: .server)
    _ = feed(&connection, frame(0x1, Array("start".utf8), fin: false), split: .whole)
    _ = connection.close(code: 4008, reason: "slow consumer")
    let got = feed(&connection, frame(0x0, Array("end".utf8)) + frame(0x8, []), split: .byteByByte)
    #expect(got == [.closed(code: 1005, reason: "", initiatedByPeer: false)])
  }

  @Test(arguments: [UInt8(0x1), 0x2])
  func closingInTheMiddleOfADataFrameDiscardsItsRest(opcode: UInt8) {
    let data = frame(opcode, Array("0123456789abcdef".utf8))
    for cut in [1, 2, 6, 7, 10, data.count - 1] {
      var connection = WebSocketConnection(role: .server)
      #expect(feed(&connection, Array(data[..<cut]), split: .whole).isEmpty)
      _ = connection.close(code: 1001, reason: "")
      let got = feed(&connection, Array(data[cut...]) + closeFrame(code: 1001), split: .byteByByte)
      #expect(got == [.closed(code: 1001, reason: "", initiatedByPeer: false)], "cut \(cut)")
    }
  }

  @Test func protocolErrorWhileClosingClosesWithoutAnotherCloseFrame() {
    var connection = WebSocketConnection(role: .server)
    _ = connection.close(code: 1000, reason: "")
    let got = feed(&connection, frame(0x3, []), split: .whole)
    #expect(got == [.closed(code: 1002, reason: "reserved opcode", initiatedByPeer: false)])
  }

  @Test func invalidPeerCloseWhileClosingIsReportedAsFailure() {
    var connection = WebSocketConnection(role: .server)
    _ = connection.close(code: 1000, reason: "")
    let got = feed(&connection, closeFrame(code: 1005), split: .whole)
    #expect(got == [.closed(code: 1002, reason: "invalid close code", initiatedByPeer: false)])
  }

  @Test func closeAfterClosedIsANoOp() {
    var connection = WebSocketConnection(role: .server)
    _ = feed(&connection, frame(0x8, []), split: .whole)
    #expect(connection.close(code: 1000, reason: "").isEmpty)
    #expect(connection.state == .closed)
  }

  @Test func failureCloseFrameCarriesAReason() {
    let got = events(frame(0x1, [0xFF]))
    #expect(got.first == serverClose(1007, "invalid UTF-8"))
  }
}
