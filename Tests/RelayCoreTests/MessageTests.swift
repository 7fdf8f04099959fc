// §7a app messages: fan-out including the sender, same data, rate limit, size limit.
import RelayProtocol
import Testing

@testable import RelayCore

@Suite struct MessageTests {
  @Test func messageGoesToEveryMemberSenderIncluded() {
    let h = Harness()
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    h.join(3, uid: "c", session: "other")
    h.send(1, #"{"type":"message.send","id":"m","session":"s","data": {"emoji":"👍","n":1e300,"big":123456789012345678901234567890,"esc":"a\"\n\u0001"} }"#)
    #expect(h.out() == [
      #"c1 <- {"type":"ok","re":"m"}"#,
      #"c1,c2 <- {"type":"message","session":"s","seq":3,"ts":\#(h.ts),"from":"a","data":{"emoji":"👍","n":1e300,"big":123456789012345678901234567890,"esc":"a\"\n\u0001"}}"#,
    ])
  }

  @Test func anyJSONValueIsData() {
    let h = Harness()
    h.join(1, uid: "a")
    h.send(1, #"{"type":"message.send","session":"s","data":null}"#)
    h.send(1, #"{"type":"message.send","session":"s","data":[1,"x",false]}"#)
    #expect(h.out() == [
      #"c1 <- {"type":"message","session":"s","seq":2,"ts":\#(h.ts),"from":"a","data":null}"#,
      #"c1 <- {"type":"message","session":"s","seq":3,"ts":\#(h.ts),"from":"a","data":[1,"x",false]}"#,
    ])
  }

  @Test func dataSizeLimitIsOnTheCompactEncoding() {
    let h = Harness()
    h.join(1, uid: "a")
    let fits = String(repeating: "x", count: 8_190)  // + 2 quotes = 8 192
    h.send(1, #"{"type":"message.send","id":"ok","session":"s","data":   "\#(fits)"   }"#)
    #expect(h.out().first == #"c1 <- {"type":"ok","re":"ok"}"#)
    h.send(1, #"{"type":"message.send","id":"big","session":"s","data":"\#(fits)y"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"big","code":"bad_request","message":"message.send: data exceeds 8192 bytes"}"#])
    h.send(1, #"{"type":"message.send","id":"none","session":"s"}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"none","code":"bad_request","message":"message.send: missing field data"}"#])
  }

  @Test func nonMemberGetsNotInSessionAndNothingIsSent() {
    let h = Harness()
    h.join(1, uid: "a")
    h.connect(2, uid: "b")
    h.send(2, #"{"type":"message.send","id":"m","session":"s","data":1}"#)
    #expect(h.out() == [#"c2 <- {"type":"error","re":"m","code":"not_in_session","message":"not in session s"}"#])
  }

  @Test func messageRateSlidingWindow() {
    let h = Harness()
    h.join(1, uid: "a")
    for i in 0..<20 {
      h.send(1, #"{"type":"message.send","session":"s","data":\#(i)}"#)
      h.advance(10)
    }
    #expect(h.out().count == 20)
    h.send(1, #"{"type":"message.send","id":"21","session":"s","data":0}"#)
    #expect(h.out() == [#"c1 <- {"type":"error","re":"21","code":"rate_limited","message":"at most 20 messages per 1000 ms"}"#])
    h.advance(800)  // first message was 1 000 ms ago
    h.send(1, #"{"type":"message.send","session":"s","data":0}"#)
    let lines = h.out()
    #expect(lines.count == 1 && typeOf(String(lines[0].split(separator: " <- ")[1])) == "message")
  }
}

@Suite struct UnrepresentableNumberTests {
  /// RFC 8259 §6: a number that overflows a double is refused, not forwarded.
  @Test func overflowingNumbersInDataAreBadRequests() {
    let h = Harness()
    h.join(1, uid: "a")
    _ = h.out()
    h.send(1, #"{"type":"message.send","id":"m","session":"s","data":[1,{"x":-1e400}]}"#)
    #expect(h.out().first?.contains(#""code":"bad_request""#) == true)
  }
}
