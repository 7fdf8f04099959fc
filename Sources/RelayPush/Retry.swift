// When a push that met a busy or failing provider is tried again (§9a: retried with
// backoff, never after `expiresAt`).
public import RelayCore
public import RelayPrimitives

public enum PushRetry {
  /// Delays before retry n: full jitter with half the ceiling kept (never at once,
  /// so a failing provider is not hammered), from 500 ms to 8 s.
  public static let backoff = Backoff(baseMs: 500, capMs: 8_000, floor: (1, 2))
  /// A follow-up (`ended`) has no ring to expire with: it may be retried this long
  /// after it was made.
  public static let followUpWindowMs: Int64 = 60_000

  /// The wall-clock time after which `job` is not worth sending, given when it was
  /// first tried (`startedWallMs`): a ring's `expiresAt`; a follow-up's window.
  public static func deadlineWallMs(_ job: PushJob, startedWallMs: Int64) -> Int64 {
    switch job.message {
    case .ring: job.expiresAtWallMs
    case .ended: startedWallMs + followUpWindowMs
    }
  }

  /// The delay before retry `attempt` (0 for the first), or nil when the retry would
  /// start at or after `deadlineWallMs`. A provider's `retry-after` is honoured
  /// when longer than the backoff.
  public static func delayMs<R: RandomNumberGenerator>(
    attempt: Int, retryAfterMs: Int64?, nowWallMs: Int64, deadlineWallMs: Int64, random: inout R
  ) -> Int64? {
    let delay = max(backoff.delayMs(attempt: attempt, using: &random), retryAfterMs ?? 0)
    return nowWallMs + delay < deadlineWallMs ? delay : nil
  }
}
