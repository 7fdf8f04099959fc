// The push service's shell parts that need no provider: settings refused at start
// (exit 64 through the command line) and the warning limiter. Sending is exercised
// against faithful fakes by Tests/integration/test_push.py.
import EventLoop
import Logging
import RelayCore
import RelayPush
import TestSupport
import Testing

@testable import RelayServer

@Suite struct PushServiceTests {
  @Test("a warning per key per interval, the next one counting what was held back")
  func warningLimiter() {
    var limiter = WarningLimiter()
    #expect(limiter.allow("apns", nowMs: 0) == 0)
    #expect(limiter.allow("apns", nowMs: 1) == nil)
    #expect(limiter.allow("apns", nowMs: 9_999) == nil)
    #expect(limiter.allow("fcm", nowMs: 5) == 0)  // keys are independent
    #expect(limiter.allow("apns", nowMs: 10_000) == 2)
    #expect(limiter.allow("apns", nowMs: 10_001) == nil)
  }

  @Test("APNs settings: all four or none; a P-256 key; usable URLs")
  func apnsSettings() throws {
    let pem = try String(contentsOfFile: TestCertificate.make("ec").key, encoding: .utf8)
    func make(_ key: String?, _ id: String?, _ team: String?, _ topic: String?, url: String = "https://api.push.apple.com")
      throws(PushSettingError) -> PushSettings.APNs?
    {
      try PushSettings.apns(
        keyPEM: key, keyId: id, teamId: team, topic: topic, url: url, sandboxURL: "https://api.sandbox.push.apple.com",
        tokenMaxAgeMs: nil)
    }
    let apns = try #require(try make(pem, "K", "T", "com.example"))
    #expect(apns.settings.topic == "com.example" && apns.tokenMaxAgeMs == APNsProviderToken.defaultMaxAgeMs)
    #expect(try make(nil, nil, nil, nil) == nil)
    #expect(throws: PushSettingError("--apns-topic needs --apns-key-file (the .p8 key)")) { try make(nil, nil, nil, "t") }
    #expect(throws: PushSettingError("--apns-key-file needs --apns-team-id")) { try make(pem, "K", "", "t") }
    #expect(throws: PushSettingError.self) { try make("garbage", "K", "T", "t") }
    #expect(throws: PushSettingError.self) { try make(pem, "K", "T", "t", url: "api.push.apple.com") }
  }

  @Test("jobs past maxQueued are dropped and counted; close() lets every held job go and every handle close")
  func boundedQueue() throws {
    let pem = try String(contentsOfFile: TestCertificate.make("ec").key, encoding: .utf8)
    // A port nobody listens on: the jobs stay held (connecting, then retrying).
    var settings = PushSettings(
      apns: try PushSettings.apns(
        keyPEM: pem, keyId: "K", teamId: "T", topic: "t", url: "https://127.0.0.1:9", sandboxURL: "https://127.0.0.1:9",
        tokenMaxAgeMs: nil))
    settings.maxQueued = 2
    let loop = Loop()
    let service = try PushService(
      loop: loop, settings: settings, caFile: nil, logger: Logger(label: "push-test"), tokenGone: { _, _ in },
      observeSeconds: { _ in })
    let event = Payload(Array(#"{"type":"call.incoming","callId":"c1"}"#.utf8))
    for device in ["a", "b", "c"] {
      service.submit(
        PushJob(
          target: PushTarget(uid: "bob", device: device, token: String(repeating: "ab", count: 32), kind: .apnsVoip, environment: .production),
          callId: "c1", sessionId: "s1", callerUid: "alice", callerName: "Alice", callType: "audio",
          expiresAtWallMs: Loop.wallClockMs() + 60_000, message: .ring(event: event)))
    }
    #expect(service.held == 2)
    #expect(service.counts["apns|dropped"] == 1)
    service.close()
    #expect(service.held == 0)
    loop.run()  // returns once every handle has closed
    loop.close()
  }
}
