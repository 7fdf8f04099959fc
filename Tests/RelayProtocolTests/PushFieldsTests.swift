// §4 `hello.device` and §9a `push.register` / `push.unregister` decoding: one set of
// rules (PushFields) for the commands and the HTTP routes.
import Testing

@testable import RelayProtocol

@Suite struct PushFieldsTests {
  private func decoded(_ json: String) -> Result<Envelope, CommandError> { CommandDecoder.decode(Array(json.utf8)) }

  @Test func decodesPushCommandsAndHelloDevice() throws {
    let hex = String(repeating: "AB", count: 32)
    #expect(
      try decoded(#"{"type":"push.register","token":"\#(hex)","kind":"apns-voip","environment":"sandbox","device":"ios:1"}"#)
        .get().command
        == .pushRegister(
          PushRegistrationFields(token: hex.lowercased(), kind: "apns-voip", environment: "sandbox", device: "ios:1")))
    #expect(
      try decoded(#"{"type":"push.register","token":"f","kind":"fcm"}"#).get().command
        == .pushRegister(PushRegistrationFields(token: "f", kind: "fcm", environment: nil, device: nil)))
    #expect(try decoded(#"{"type":"push.unregister","token":"\#(hex)"}"#).get().command == .pushUnregister(token: hex.lowercased()))
    #expect(
      try decoded(#"{"type":"hello","token":"t","device":"A-z_0.9:x"}"#).get().command
        == .hello(Hello(token: "t", dev: nil, resume: nil, device: "A-z_0.9:x")))
  }

  @Test(arguments: [
    #"{"type":"push.register","token":"abc","kind":"apns"}"#,
    #"{"type":"push.register","token":"f","kind":"fcm","environment":"sandbox"}"#,
    #"{"type":"push.register","token":"f","kind":"hms"}"#,
    #"{"type":"push.register","token":7,"kind":"fcm"}"#,
    #"{"type":"push.register","kind":"fcm"}"#,
    #"{"type":"push.register","token":"f","kind":"fcm","device":""}"#,
    #"{"type":"push.register","token":"","kind":"fcm"}"#,
    #"{"type":"push.register","token":"é","kind":"fcm"}"#,
    #"{"type":"push.unregister","token":""}"#,
    #"{"type":"hello","token":"t","device":"a/b"}"#,
    #"{"type":"hello","token":"t","device":5}"#,
  ])
  func refusesBadFields(_ json: String) {
    guard case .failure(let error) = decoded(json) else {
      Issue.record("accepted \(json)")
      return
    }
    #expect(error.code == .badRequest)
  }

  @Test func bounds() {
    #expect(PushFields.isDevice(String(repeating: "d", count: 128)))
    #expect(!PushFields.isDevice(String(repeating: "d", count: 129)))
    #expect((try? PushFields.canonicalToken(String(repeating: "a", count: 200), kind: "apns").get()) != nil)
    #expect((try? PushFields.canonicalToken(String(repeating: "a", count: 201), kind: "apns").get()) == nil)
    #expect((try? PushFields.canonicalToken(String(repeating: "a", count: 63), kind: "apns").get()) == nil)
    #expect((try? PushFields.canonicalToken(String(repeating: "x", count: 4_096), kind: "fcm").get()) != nil)
    #expect((try? PushFields.canonicalToken(String(repeating: "x", count: 4_097), kind: "fcm").get()) == nil)
  }
}
