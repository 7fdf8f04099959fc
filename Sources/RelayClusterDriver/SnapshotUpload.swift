/// Storing one snapshot in Redis without a long reply (docs/cluster.md, "Bounded
/// history"), as a pure machine: the ticker uploads the bytes in pieces into a
/// staging key of its own — `SET … EX` for the first, `APPEND` for each next, one in
/// flight, so every reply is one piece's and the node's appends interleave with them —
/// then one script swaps the staged bytes in, records the snapshot, trims the log
/// behind the previous one and logs the `digest` record. The adapter sends what each
/// step names and feeds back the reply; whether the node may still store (same
/// generation, ready, numbered) is asked before every step.
public struct SnapshotUpload: Equatable, Sendable {
  /// The pieces of the snapshot (at least one command is sent, for an empty one too).
  public let pieces: Int
  /// The step whose reply is awaited (nil before `start`, or once finished).
  public private(set) var awaiting: Step?

  public enum Step: Equatable, Sendable {
    /// `SET staging <piece 0> EX …`: the staging key starts over.
    case set
    /// `APPEND staging <piece>`.
    case append(piece: Int)
    /// The swap script (checks the staged length, renames, trims, logs the digest).
    case swap
    /// Nothing more to send.
    case finished(Outcome)
  }

  public enum Outcome: Equatable, Sendable {
    /// Swapped in: the log is trimmed behind the previous snapshot; the reply is
    /// the `digest` record's append (its stream id).
    case stored
    /// A newer snapshot was stored first; this one is dropped.
    case superseded
    /// The staged bytes were not all there (the key expired or was overwritten).
    case short
    /// A piece or the swap was refused, or its connection ended: the next due
    /// snapshot tries again.
    case failed
    /// The node may no longer store (it left the generation, lost Redis, or stops).
    case abandoned
  }

  public enum Reply: Equatable, Sendable {
    /// A piece was staged (`+OK` or the new length).
    case staged
    /// The swap script's answer: `stored` with the digest's stream id, `old`, `short`.
    case swapped
    case old
    case short
    /// An error reply (`OOM`, `NOSCRIPT` after its retry) or no reply at all.
    case refused
  }

  public init(pieces: Int) { self.pieces = max(1, pieces) }

  /// The first step, if the node may store.
  public mutating func start(mayStore: Bool) -> Step { advance(to: .set, mayStore: mayStore) }

  /// The reply to the awaited step, and whether the node may still store.
  public mutating func handle(_ reply: Reply, mayStore: Bool) -> Step {
    guard let step = awaiting else { return .finished(.failed) }
    switch (step, reply) {
    case (.set, .staged): return advance(to: pieces > 1 ? .append(piece: 1) : .swap, mayStore: mayStore)
    case (.append(let piece), .staged):
      return advance(to: piece + 1 < pieces ? .append(piece: piece + 1) : .swap, mayStore: mayStore)
    case (.swap, .swapped): return finish(.stored)
    case (.swap, .old): return finish(.superseded)
    case (.swap, .short): return finish(.short)
    default: return finish(.failed)
    }
  }

  private mutating func advance(to step: Step, mayStore: Bool) -> Step {
    guard mayStore else { return finish(.abandoned) }
    awaiting = step
    return step
  }

  private mutating func finish(_ outcome: Outcome) -> Step {
    awaiting = nil
    return .finished(outcome)
  }
}
