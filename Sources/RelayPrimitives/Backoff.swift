// Reconnect and retry delays. Full jitter (every delay drawn uniformly from zero up
// to an exponential ceiling) spreads the retries of many clients that lost the same
// server at the same moment, instead of bringing them back in step.

/// Delays before retry `attempt` (0 for the first retry): uniform in
/// [floor, ceiling], ceiling = min(cap, base · 2^attempt), floor a fixed share of
/// the ceiling (none by default: full jitter). The randomness is passed in, so pure
/// code stays deterministic for a given seed.
public struct Backoff: Sendable, Equatable {
  /// The ceiling of the first retry.
  public let baseMs: Int64
  /// The highest ceiling.
  public let capMs: Int64
  /// The share of the ceiling always waited, `floorNumerator / floorDenominator`.
  public let floorNumerator: Int64
  public let floorDenominator: Int64

  /// Doublings past this many change nothing: base · 2^20 exceeds any sensible cap.
  public static let maxDoublings = 20

  /// Full jitter: delays uniform in [0, min(cap, base · 2^attempt)].
  public init(baseMs: Int64, capMs: Int64) {
    self.init(baseMs: baseMs, capMs: capMs, floor: (0, 1))
  }

  /// Delays uniform in [ceiling · floor, ceiling]: a retry that must never come at
  /// once keeps a share of its ceiling.
  public init(baseMs: Int64, capMs: Int64, floor: (numerator: Int64, denominator: Int64)) {
    precondition(baseMs >= 0 && capMs >= 0, "backoff: base and cap must not be negative")
    precondition(
      floor.denominator > 0 && (0...floor.denominator).contains(floor.numerator),
      "backoff: the floor is a share of the ceiling, between 0 and 1")
    self.baseMs = baseMs
    self.capMs = capMs
    floorNumerator = floor.numerator
    floorDenominator = floor.denominator
  }

  /// The largest delay of retry `attempt`: min(cap, base · 2^attempt), never overflowing.
  @inlinable
  public func ceilingMs(attempt: Int) -> Int64 {
    let doublings = Swift.min(Swift.max(attempt, 0), Self.maxDoublings)
    let (grown, overflow) = baseMs.multipliedReportingOverflow(by: Int64(1) << Int64(doublings))
    return overflow ? capMs : Swift.min(capMs, grown)
  }

  /// The smallest delay of retry `attempt`.
  @inlinable
  public func floorMs(attempt: Int) -> Int64 {
    let ceiling = ceilingMs(attempt: attempt)
    return ceiling / floorDenominator * floorNumerator + ceiling % floorDenominator * floorNumerator / floorDenominator
  }

  /// A delay for retry `attempt`, drawn from `random`.
  @inlinable
  public func delayMs<R: RandomNumberGenerator>(attempt: Int, using random: inout R) -> Int64 {
    let ceiling = ceilingMs(attempt: attempt)
    let floor = floorMs(attempt: attempt)
    return floor + Int64(random.next() % UInt64(ceiling - floor + 1))
  }
}
