// §1 hello deadline, §3 identity, §4 welcome, §2 envelope basics.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct HelloTests {
  @Test func devHelloGetsWelcome() {
    let h = Harness()
    h.open(1)
    h.send(1, #"{"type":"hello","id":"h1","dev":{"uid":"alice","name":"Alice"}}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"welcome","re":"h1","connectionId":"id1","resumeToken":"id2","user":{"uid":"alice","name":"Alice","role":"participant"},"heartbeat":{"interval":10000,"timeout":15000},"resumed":false,"server":{"version":"test"}}"#
    ])
  }

  @Test func devRoleAndAvatarAreTaken() {
    let h = Harness()
    h.open(1)
    h.send(1, #"{"type":"hello","dev":{"uid":"bob","name":"Bob","avatar":"a.png","role":"host"}}"#)
    let lines = h.out()
    #expect(lines.count == 1)
    #expect(lines[0].contains(#""user":{"uid":"bob","name":"Bob","avatar":"a.png","role":"host"}"#))
    #expect(!lines[0].contains(#""re""#))
  }

  @Test func pingIsAnsweredByPong() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"ping","id":"p"}"#)
    h.send(1, #"{"type":"ping"}"#)
    #expect(h.out() == [#"c1 <- {"type":"pong","re":"p"}"#, #"c1 <- {"type":"pong"}"#])
  }

  @Test func commandBeforeHelloIsUnauthorizedAndCloses() {
    let h = Harness()
    h.open(1)
    h.send(1, #"{"type":"session.join","id":"j","session":"s"}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"error","re":"j","code":"unauthorized","message":"hello first"}"#,
      "close c1 4501 command before hello",
    ])
    h.send(1, #"{"type":"ping"}"#)  // ignored once closing
    #expect(h.out().isEmpty)
  }

  @Test func helloTimeoutClosesWith4501() {
    let h = Harness()
    h.open(1)
    #expect(h.core.nextDeadline == h.now.monoMs + 10_000)
    h.advance(9_999)
    #expect(h.out().isEmpty)
    h.advance(1)
    #expect(h.out() == ["close c1 4501 no hello in time"])
    #expect(h.core.nextDeadline == nil)
  }

  @Test func helloInTimeCancelsTheDeadline() {
    let h = Harness(configure: withoutHeartbeats)
    h.connect(1, uid: "a")
    #expect(h.core.nextDeadline == nil)
    h.advance(20_000)
    #expect(h.out().isEmpty)
  }

  @Test func secondHelloIsAConflict() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"hello","id":"x","dev":{"uid":"a","name":"A"}}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"error","re":"x","code":"conflict","message":"hello was already accepted on this connection"}"#
    ])
  }

  @Test func devModeRefusesTokens() {
    let h = Harness()
    h.open(1)
    h.send(1, #"{"type":"hello","token":"abc"}"#)
    let lines = h.out()
    #expect(lines.count == 2)
    #expect(lines[0].contains(#""code":"unauthorized""#))
    #expect(lines[1] == "close c1 4501 unauthorized")
  }

  @Test func helloWithoutCredentialIsBadRequestAndKeepsWaiting() {
    let h = Harness()
    h.open(1)
    h.send(1, #"{"type":"hello","id":"1"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"1","code":"bad_request","message":"hello needs dev {uid, name}"}"#])
    h.send(1, #"{"type":"hello","dev":{"uid":"a","name":"A"}}"#)
    #expect(typeOf(delivered(to: 1, h.out())[0]) == "welcome")
  }

  @Test func tokenModeAcceptsVerifiedTokens() {
    let alice = Identity(uid: "alice", name: "Alice", role: .host, sessions: .any)
    let h = Harness(devMode: false, tokens: ["good": alice])
    h.open(1)
    h.send(1, #"{"type":"hello","token":"good"}"#)
    let lines = h.out()
    #expect(lines.count == 1)
    #expect(lines[0].contains(#""user":{"uid":"alice","name":"Alice","role":"host"}"#))
  }

  @Test func tokenModeRefusesBadTokenDevLoginAndMissingToken() {
    let h = Harness(devMode: false)
    h.open(1)
    h.send(1, #"{"type":"hello","token":"forged"}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"error","code":"unauthorized","message":"invalid or expired token"}"#,
      "close c1 4501 unauthorized",
    ])
    h.open(2)
    h.send(2, #"{"type":"hello","dev":{"uid":"a","name":"A"}}"#)
    #expect(h.out().last == "close c2 4501 unauthorized")
    h.open(3)
    h.send(3, #"{"type":"hello"}"#)
    #expect(h.out() == [#"c3 <- {"type":"error","code":"bad_request","message":"hello needs a token"}"#])
  }

  @Test func sessionsClaimRestrictsJoin() {
    let limited = Identity(uid: "u", name: "U", sessions: .only(["room1"]))
    let none = Identity(uid: "n", name: "N")
    let h = Harness(devMode: false, tokens: ["limited": limited, "none": none])
    h.open(1)
    h.send(1, #"{"type":"hello","token":"limited"}"#)
    h.open(2)
    h.send(2, #"{"type":"hello","token":"none"}"#)
    _ = h.out()
    h.send(1, #"{"type":"session.join","id":"a","session":"room2"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"a","code":"forbidden","message":"token does not allow session room2"}"#])
    h.send(1, #"{"type":"session.join","id":"b","session":"room1"}"#)
    #expect(h.out().first == #"c1 <- {"type":"ok","re":"b"}"#)
    h.send(2, #"{"type":"session.join","id":"c","session":"room1"}"#)
    #expect(h.out().first?.contains(#""code":"forbidden""#) == true)
  }

  @Test func unknownTypeAndBadRequestReplies() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"nope","id":"7"}"#)
    h.send(1, #"{"type":"nope"}"#)
    h.send(1, "not json")
    h.send(1, #"{"type":"session.join","id":"8"}"#)
    h.send(1, #"{"type":"session.join","id":9,"session":"s"}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"error","re":"7","code":"unknown_type","message":"unknown type nope"}"#,
      #"c1 <- {"type":"error","code":"unknown_type","message":"unknown type nope"}"#,
      #"c1 <- {"type":"error","code":"bad_request","message":"not JSON (unexpectedByte at byte 1)"}"#,
      #"c1 <- {"type":"error","re":"8","code":"bad_request","message":"session.join: missing field session"}"#,
      #"c1 <- {"type":"error","code":"bad_request","message":"id must be a string"}"#,
    ])
  }

  @Test func consecutiveBadMessagesCloseWith4029AndAGoodOneResets() {
    let h = Harness()
    h.connect(1, uid: "a")
    for _ in 0..<19 { h.send(1, "[]") }
    h.send(1, #"{"type":"ping"}"#)
    for _ in 0..<19 { h.send(1, "[]") }
    #expect(!h.out().contains { $0.hasPrefix("close") })
    h.send(1, "[]")
    let lines = h.out()
    #expect(lines.last == "close c1 4029 too many bad messages")
    #expect(lines.count == 2)
  }

  @Test func nonBadErrorsAlsoResetTheBadCount() {
    let h = Harness { $0.maxBadMessages = 2 }
    h.connect(1, uid: "a")
    h.send(1, "1")
    h.send(1, #"{"type":"hand.raise","session":"x"}"#)  // not_in_session: not a bad message
    h.send(1, "1")
    #expect(!h.out().contains { $0.hasPrefix("close") })
    h.send(1, "1")
    #expect(h.out().last == "close c1 4029 too many bad messages")
  }

  @Test func badMessagesBeforeHelloDoNotClose() {
    let h = Harness()
    h.open(1)
    h.send(1, "{")
    #expect(h.out().count == 1)
  }

  @Test func unknownCallIsNotFound() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"call.accept","id":"c","callId":"x"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"c","code":"not_found","message":"no call x"}"#])
  }

  @Test func backgroundIsAcknowledged() {
    let h = Harness()
    h.connect(1, uid: "a")
    h.send(1, #"{"type":"client.background","id":"b","background":true}"#)
    h.send(1, #"{"type":"client.background","background":"yes"}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"ok","re":"b"}"#,
      #"c1 <- {"type":"error","code":"bad_request","message":"client.background: background must be a boolean"}"#,
    ])
  }
}
