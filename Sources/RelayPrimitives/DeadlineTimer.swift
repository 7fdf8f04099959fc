/// When to re-arm the one timer that fires a core's next deadline, decided once for
/// every mode: standalone the timer runs the core's `tick` itself; with a log (a data
/// dir, a cluster's ticker) it logs a `tick` record, so a replay fires each deadline
/// at the same record. Pure: the deadline and the time are passed in, the caller
/// starts or stops its own timer as told.
public struct DeadlineTimer: Equatable, Sendable {
  /// The deadline the timer is armed for (nil: stopped, or fired since).
  public private(set) var armedMs: Int64?

  /// A timer never waits longer, so a clock that jumps is noticed within the hour.
  public static let longestMs: Int64 = 3_600_000

  public enum Change: Equatable, Sendable {
    case keep
    case stop
    case start(afterMs: UInt64)
  }

  public init() {}

  /// The next deadline is `dueMs` (nil: none) at `nowMs` in the same clock.
  public mutating func arm(dueMs: Int64?, nowMs: Int64) -> Change {
    if dueMs == armedMs { return .keep }
    armedMs = dueMs
    guard let dueMs else { return .stop }
    // At least 1 ms: a libuv timer (1.44) restarted with 0 inside its own callback
    // runs again in the same timers pass, and a mass expiry the core spreads over
    // ticks (RelayCore.tick) must get a turn of its own for each part, with I/O between.
    return .start(afterMs: UInt64(max(1, min(dueMs - nowMs, Self.longestMs))))
  }

  /// The timer fired: whatever is due next arms it again.
  public mutating func fired() { armedMs = nil }

  /// Nothing may fire now (not the ticker, not ready, stopping).
  public mutating func disarm() -> Change {
    armedMs = nil
    return .stop
  }
}
