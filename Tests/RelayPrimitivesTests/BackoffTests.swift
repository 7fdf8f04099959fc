import RelayPrimitives
import Testing

@Suite struct BackoffTests {
  @Test func fullJitterStaysWithinTheCeilingAndReachesIt() {
    let backoff = Backoff(baseMs: 500, capMs: 20_000)
    var random = SeededRandom(seed: 1)
    for attempt in 0..<30 {
      let ceiling = min(20_000, 500 << Int64(min(attempt, 20)))
      #expect(backoff.ceilingMs(attempt: attempt) == ceiling)
      #expect(backoff.floorMs(attempt: attempt) == 0)
      let delays = (0..<300).map { _ in backoff.delayMs(attempt: attempt, using: &random) }
      #expect(delays.allSatisfy { $0 >= 0 && $0 <= ceiling })
      #expect(delays.max()! > ceiling * 9 / 10 && delays.min()! < ceiling / 10)
    }
  }

  @Test func sameSeedSameDelays() {
    let backoff = Backoff(baseMs: 100, capMs: 2_000)
    var a = SeededRandom(seed: 42)
    var b = SeededRandom(seed: 42)
    let first = (0..<50).map { backoff.delayMs(attempt: $0 % 8, using: &a) }
    let second = (0..<50).map { backoff.delayMs(attempt: $0 % 8, using: &b) }
    #expect(first == second)
  }

  /// A floor of two thirds: delays in [c · 2/3, c] (the webhook's 200 ms + up to 50 %).
  @Test func aFloorKeepsItsShareOfTheCeiling() {
    let backoff = Backoff(baseMs: 300, capMs: 7_500, floor: (2, 3))
    var random = SeededRandom(seed: 7)
    for (attempt, floor) in [(0, Int64(200)), (1, 400), (2, 800), (9, 5_000), (59, 5_000)] {
      #expect(backoff.floorMs(attempt: attempt) == floor)
      for _ in 0..<100 {
        let ms = backoff.delayMs(attempt: attempt, using: &random)
        #expect(ms >= floor && ms <= floor + floor / 2)
      }
    }
  }

  @Test func hugeBasesAndAttemptsStayAtTheCap() {
    let backoff = Backoff(baseMs: Int64.max / 2, capMs: 1_000)
    #expect(backoff.ceilingMs(attempt: 5) == 1_000)
    #expect(Backoff(baseMs: 1, capMs: 10).ceilingMs(attempt: -3) == 1)
    #expect(Backoff(baseMs: 1, capMs: Int64.max).ceilingMs(attempt: 1_000) == 1 << 20)
  }
}
