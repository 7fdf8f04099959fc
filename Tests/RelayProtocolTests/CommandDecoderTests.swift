// §2 envelope decoding: every command shape and every error path.
import Testing

@testable import RelayProtocol

func decode(_ text: String) -> Result<Envelope, CommandError> {
  CommandDecoder.decode(Array(text.utf8))
}

func command(_ text: String) -> Command? {
  if case .success(let envelope) = decode(text) { return envelope.command }
  return nil
}

func failure(_ text: String) -> CommandError? {
  if case .failure(let error) = decode(text) { return error }
  return nil
}

@Suite struct CommandDecoderTests {
  @Test func decodesEveryCommand() {
    #expect(command(#"{"type":"ping"}"#) == .ping)
    #expect(command(#"{"type":"session.join","session":"s","extra":[1]}"#) == .sessionJoin(session: "s"))
    #expect(command(#"{"type":"session.leave","session":"s"}"#) == .sessionLeave(session: "s"))
    #expect(command(#"{"type":"participant.remove","session":"s","uid":"u"}"#) == .participantRemove(session: "s", uid: "u"))
    #expect(command(#"{"type":"hand.raise","session":"s"}"#) == .handRaise(session: "s"))
    #expect(command(#"{"type":"hand.lower","session":"s"}"#) == .handLower(session: "s", uid: nil))
    #expect(command(#"{"type":"hand.lower","session":"s","uid":"u"}"#) == .handLower(session: "s", uid: "u"))
    #expect(command(#"{"type":"hand.lower_all","session":"s"}"#) == .handLowerAll(session: "s"))
    #expect(command(#"{"type":"message.send","session":"s","data": { "a" : [ 1 ] } }"#) == .messageSend(session: "s", data: Array(#"{"a":[1]}"#.utf8)))
    #expect(command(#"{"type":"client.background","background":false}"#) == .clientBackground(background: false))
    #expect(command(#"{"type":"call.accept","callId":"c"}"#) == .callAccept(callId: "c"))
    #expect(command(#"{"type":"call.reject","callId":"c"}"#) == .callReject(callId: "c", reason: .declined))
    #expect(command(#"{"type":"call.reject","callId":"c","reason":"busy"}"#) == .callReject(callId: "c", reason: .busy))
    #expect(command(#"{"type":"call.cancel","callId":"c"}"#) == .callCancel(callId: "c"))
    #expect(command(#"{"type":"call.end","callId":"c"}"#) == .callEnd(callId: "c"))
    #expect(command(#"{"type":"call.initiate","to":["a","b"],"callType":"video","metadata":{"k":1}}"#)
      == .callInitiate(to: ["a", "b"], callType: .video, metadata: JSONObject([(key: "k", value: .number(JSONNumber(1)))])))
  }

  @Test func decodesHelloVariants() {
    #expect(command(#"{"type":"hello","token":"t"}"#) == .hello(Hello(token: "t", dev: nil, resume: nil)))
    #expect(command(#"{"type":"hello","dev":{"uid":"u","name":"N"}}"#)
      == .hello(Hello(token: nil, dev: DevLogin(uid: "u", name: "N", avatar: nil, role: .participant), resume: nil)))
    #expect(command(#"{"type":"hello","dev":{"uid":"u","name":"N","role":"host","avatar":"x"}}"#)
      == .hello(Hello(token: nil, dev: DevLogin(uid: "u", name: "N", avatar: "x", role: .host), resume: nil)))
    let resume = ResumeRequest(token: "r", sessions: [(session: "b", seq: 7), (session: "a", seq: 0)])
    #expect(command(#"{"type":"hello","token":"t","resume":{"token":"r","sessions":{"b":7,"a":0}}}"#)
      == .hello(Hello(token: "t", dev: nil, resume: resume)))
  }

  @Test func idIsEchoedWhenReadable() {
    if case .success(let envelope) = decode(#"{"id":"x1","type":"ping"}"#) {
      #expect(envelope.id == "x1")
    } else {
      Issue.record("ping should decode")
    }
    #expect(failure(#"{"id":"x2","type":"session.join"}"#) == CommandError(code: .badRequest, message: "session.join: missing field session", re: "x2", type: "session.join"))
    #expect(failure(#"{"id":3,"type":"ping"}"#)?.re == nil)
    #expect(failure(#"{"id":"x4","type":"what"}"#) == CommandError(code: .unknownType, message: "unknown type what", re: "x4"))
    #expect(failure(#"{"id":"x5"}"#) == CommandError(code: .badRequest, message: "type must be a string", re: "x5"))
    #expect(failure(#"{"id":"x6","type":7}"#)?.code == .badRequest)
  }

  @Test(arguments: [
    "", "nope", "[]", "\"ping\"", "42", "null", #"{"type":"ping""#,
    #"{"type":"session.join","session":1}"#, #"{"type":"session.join","session":""}"#,
    #"{"type":"participant.remove","session":"s"}"#, #"{"type":"hand.lower","session":"s","uid":5}"#,
    #"{"type":"client.background"}"#, #"{"type":"client.background","background":1}"#,
    #"{"type":"hello","token":5}"#, #"{"type":"hello","dev":{"uid":"u"}}"#, #"{"type":"hello","dev":"u"}"#,
    #"{"type":"hello","dev":{"uid":"u","name":"n","role":"admin"}}"#,
    #"{"type":"hello","resume":{"sessions":{}}}"#, #"{"type":"hello","resume":{"token":"r","sessions":{"s":-1}}}"#,
    #"{"type":"hello","resume":{"token":"r","sessions":{"s":1.5}}}"#, #"{"type":"message.send","session":"s"}"#,
    #"{"type":"call.initiate","to":[],"callType":"audio"}"#, #"{"type":"call.initiate","to":["a"],"callType":"fax"}"#,
    #"{"type":"call.initiate","to":"a","callType":"audio"}"#, #"{"type":"call.initiate","to":[1],"callType":"audio"}"#,
    #"{"type":"call.initiate","to":["a"],"callType":"audio","metadata":[]}"#,
    #"{"type":"call.reject","callId":"c","reason":"meh"}"#, #"{"type":"call.accept"}"#,
  ])
  func badRequests(_ text: String) {
    #expect(failure(text)?.code == .badRequest, "\(text) should be bad_request")
  }

  @Test func sizeLimits() {
    let callees = (0..<33).map { "\"u\($0)\"" }.joined(separator: ",")
    #expect(failure(#"{"type":"call.initiate","to":[\#(callees)],"callType":"audio"}"#)?.code == .badRequest)
    let meta = String(repeating: "m", count: 4_090)
    #expect(failure(#"{"type":"call.initiate","to":["a"],"callType":"audio","metadata":{"k":"\#(meta)"}}"#)?.code == .badRequest)
    let longId = String(repeating: "s", count: 257)
    #expect(failure(#"{"type":"session.join","session":"\#(longId)"}"#)?.code == .badRequest)
    let data = String(repeating: "d", count: 8_190)
    #expect(command(#"{"type":"message.send","session":"s","data":"\#(data)"}"#) != nil)
    #expect(failure(#"{"type":"message.send","session":"s","data":"\#(data)d"}"#)?.code == .badRequest)
  }

  @Test func nullOptionalFieldsAreAbsent() {
    #expect(command(#"{"type":"hand.lower","session":"s","uid":null,"id":null}"#) == .handLower(session: "s", uid: nil))
  }

  @Test func deepNestingIsABadRequestNotACrash() {
    let deep = #"{"type":"message.send","session":"s","data":"# + String(repeating: "[", count: 10_000)
    #expect(failure(deep)?.code == .badRequest)
  }

  @Test func everyKnownTypeDecodesToItsName() {
    for type in Command.knownTypes {
      if case .failure(let error) = decode(#"{"type":"\#(type)"}"#) {
        #expect(error.code != .unknownType, "\(type)")
      }
    }
    #expect(command(#"{"type":"ping"}"#)?.typeName == "ping")
  }
}
