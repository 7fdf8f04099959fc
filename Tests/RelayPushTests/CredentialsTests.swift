import RelayCore
import RelayPrimitives
import RelayProtocol
import RelayPush
import Testing

@Suite("RelayPush: credentials' lifetimes and retries")
struct CredentialsTests {
  @Test("the APNs provider token is reused below its max age and signed anew after it")
  func providerTokenLifetime() throws {
    var provider = APNsProviderToken(keyId: "KID", teamId: "TEAM")
    var signatures = 0
    let sign: ([UInt8]) -> [UInt8] = { _ in signatures += 1; return [UInt8(signatures)] }
    let first = provider.token(nowMonoMs: 0, nowWallMs: 1_700_000_000_000, signature: sign)
    #expect(provider.token(nowMonoMs: APNsProviderToken.defaultMaxAgeMs - 1, nowWallMs: 0, signature: sign) == first)
    #expect(signatures == 1)
    let second = provider.token(nowMonoMs: APNsProviderToken.defaultMaxAgeMs, nowWallMs: 1_700_003_000_000, signature: sign)
    #expect(second != first && signatures == 2 && provider.signed == 2)
    let parts = second.split(separator: ".").map(String.init)
    #expect(Base64URL.decode(parts[0]).map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"KID"}"#)
    #expect(Base64URL.decode(parts[1]).map { String(decoding: $0, as: UTF8.self) } == #"{"iss":"TEAM","iat":1700003000}"#)
    // Apple's bounds: renewed between 20 and 60 minutes.
    #expect(APNsProviderToken.defaultMaxAgeMs >= APNsProviderToken.minimumAgeMs)
    #expect(APNsProviderToken.defaultMaxAgeMs < 60 * 60_000)
  }

  @Test("ExpiredProviderToken drops the token only once it is old enough to renew")
  func providerTokenExpiry() {
    var provider = APNsProviderToken(keyId: "K", teamId: "T")
    _ = provider.token(nowMonoMs: 1000, nowWallMs: 0) { _ in [1] }
    let early = provider.expire(nowMonoMs: 1000 + APNsProviderToken.minimumAgeMs - 1)
    #expect(!early)
    #expect(provider.current != nil)
    let old = provider.expire(nowMonoMs: 1000 + APNsProviderToken.minimumAgeMs)
    #expect(old)
    #expect(provider.current == nil)
    var short = APNsProviderToken(keyId: "K", teamId: "T", maxAgeMs: 500)
    _ = short.token(nowMonoMs: 0, nowWallMs: 0) { _ in [1] }
    let expired = short.expire(nowMonoMs: 500)
    #expect(expired)
  }

  @Test("the OAuth token: one fetch at a time, reused until shortly before expiry, dropped on 401")
  func oauthCache() {
    var cache = OAuthTokenCache()
    #expect(cache.valid(nowMonoMs: 0) == nil)
    let begun1 = cache.beginFetch(nowMonoMs: 0)
    #expect(begun1)
    let begun2 = cache.beginFetch(nowMonoMs: 1)
    #expect(!begun2)  // one under way
    cache.fetchSucceeded(token: "t1", expiresInMs: 3_600_000, nowMonoMs: 10)
    #expect(cache.valid(nowMonoMs: 10 + 3_540_000 - 1) == "t1")
    #expect(cache.valid(nowMonoMs: 10 + 3_540_000) == nil)  // a minute before expiry
    let begun3 = cache.beginFetch(nowMonoMs: 100)
    #expect(!begun3)
    let begun4 = cache.beginFetch(nowMonoMs: 3_600_000)
    #expect(begun4)
    cache.fetchFailed()
    let begun5 = cache.beginFetch(nowMonoMs: 3_600_001)
    #expect(begun5)
    cache.fetchSucceeded(token: "t2", expiresInMs: 10_000, nowMonoMs: 0)
    #expect(cache.valid(nowMonoMs: 8_999) == "t2" && cache.valid(nowMonoMs: 9_000) == nil)  // a tenth of a short lifetime
    cache.invalidate()
    #expect(cache.valid(nowMonoMs: 1) == nil)
    #expect(cache.fetched == 2)
  }

  @Test("retries back off within bounds, honour retry-after, and never start at or after the deadline")
  func retrySchedule() {
    var random = SeededRandom(seed: 7)
    for attempt in 0..<8 {
      let delay = PushRetry.delayMs(attempt: attempt, retryAfterMs: nil, nowWallMs: 0, deadlineWallMs: 1_000_000, random: &random)
      let ceiling = PushRetry.backoff.ceilingMs(attempt: attempt)
      #expect(delay.map { $0 >= ceiling / 2 && $0 <= ceiling } == true)
    }
    #expect(PushRetry.delayMs(attempt: 0, retryAfterMs: 5_000, nowWallMs: 0, deadlineWallMs: 10_000, random: &random) == 5_000)
    #expect(PushRetry.delayMs(attempt: 0, retryAfterMs: 5_000, nowWallMs: 5_000, deadlineWallMs: 10_000, random: &random) == nil)
    #expect(PushRetry.delayMs(attempt: 0, retryAfterMs: nil, nowWallMs: 10_000, deadlineWallMs: 10_000, random: &random) == nil)
    #expect(PushRetry.delayMs(attempt: 3, retryAfterMs: nil, nowWallMs: 9_000, deadlineWallMs: 10_000, random: &random) == nil)
  }

  @Test("a ring's deadline is expiresAt; a follow-up's is its window after it was made")
  func deadlines() {
    #expect(PushRetry.deadlineWallMs(job(.apnsVoip, .ring(event: Payload(ringEvent))), startedWallMs: 5) == 1_700_000_045_000)
    #expect(PushRetry.deadlineWallMs(job(.fcm, .ended(reason: "cancelled")), startedWallMs: 1_800_000_000_000)
      == 1_800_000_000_000 + PushRetry.followUpWindowMs)
  }
}
