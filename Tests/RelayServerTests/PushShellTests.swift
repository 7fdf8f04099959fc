// The shell's side of §9a push: a provider's "token gone" answer goes through the
// input log with no connection waiting, and removes the registration.
import Logging
import RelayCore
import RelayProtocol
import Testing

@testable import RelayServer

@Suite struct PushShellTests {
  @Test func pushTokenInvalidRemovesTheRegistration() {
    let config = ServerConfig(core: CoreConfig(devMode: true, serverVersion: "test"))
    let server = RelayServer(config: config, logger: Logger(label: "push-test"), verifyToken: { _, _ in nil })
    defer { server.loop.close() }
    let bob = Identity(uid: "bob", name: "Bob")
    for token in ["fcm-1", "fcm-2"] {
      let fields = PushRegistrationFields(token: token, kind: "fcm", environment: nil, device: nil)
      _ = server.core.pushDeviceAction(.register(fields), device: "d-\(token)", identity: bob, at: server.now)
    }
    server.pushTokenInvalid(uid: "bob", token: "fcm-1")
    #expect(server.core.pushRegistrations(of: "bob").map(\.token) == ["fcm-2"])
    server.pushTokenInvalid(uid: "bob", token: "unknown")  // nothing to remove, nothing to answer
    #expect(server.core.pushStats.registrations == 1)
  }

  @Test func theDeviceBodyIsCheckedLikePushRegister() {
    #expect((try? RelayServer.pushRegistration(Array(#"{"token":"t","kind":"fcm"}"#.utf8)).get()) != nil)
    for body in [#"{"token":"t"}"#, #"{"token":"t","kind":"fcm","environment":5}"#, "[]", "", #"{"token":"ab","kind":"apns"}"#] {
      #expect((try? RelayServer.pushRegistration(Array(body.utf8)).get()) == nil, "\(body)")
    }
  }
}
