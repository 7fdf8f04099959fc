// The push service's shell parts that need no provider: settings refused at start
// (exit 64 through the command line) and the warning limiter. Sending is exercised
// against faithful fakes by Tests/integration/test_push.py.
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
}
