/// When a replicated log makes its snapshots (docs/cluster.md, "Bounded history"; the
/// data dir's too): one at a time; while one is on its way (joined and digested or
/// written on the thread pool, then stored), the newest `waitingMax` due ones wait
/// and an older waiting one is superseded. So work and memory never pile up behind a
/// slow Redis, disk or pool, and the last positions of a burst are always made, so
/// the trim behind the previous snapshot keeps the log at about one interval. Pure:
/// what is made next and what is dropped are decided here; the owner captures,
/// offloads and frees (`Capture` is whatever it captured).
public struct SnapshotQueue<Capture> {
  public let waitingMax: Int
  /// A snapshot is on its way.
  public private(set) var busy = false
  private var waiting: [Capture] = []
  /// Due snapshots dropped for a newer one.
  public private(set) var superseded: UInt64 = 0

  public init(waitingMax: Int = 2) {
    precondition(waitingMax >= 1, "at least the newest due snapshot waits")
    self.waitingMax = waitingMax
  }

  public var waitingCount: Int { waiting.count }

  /// What to do with one due snapshot, and what to drop.
  public struct Decision {
    /// Make this one now (nil: it waits).
    public var make: Capture?
    /// Superseded: free it.
    public var drop: [Capture] = []
  }

  /// A snapshot fell due and was captured.
  public mutating func due(_ capture: Capture) -> Decision {
    guard busy else {
      busy = true
      return Decision(make: capture)
    }
    waiting.append(capture)
    var drop: [Capture] = []
    while waiting.count > waitingMax {
      drop.append(waiting.removeFirst())
      superseded += 1
    }
    return Decision(make: nil, drop: drop)
  }

  /// The snapshot on its way is done (stored, abandoned or only digested): the
  /// oldest waiting one, if any, is made next.
  public mutating func finished() -> Capture? {
    guard !waiting.isEmpty else {
      busy = false
      return nil
    }
    return waiting.removeFirst()
  }

  /// The state the waiting ones were captured from is gone, or a snapshot of
  /// everything was made another way: they are all dropped, not counted as superseded.
  public mutating func dropWaiting() -> [Capture] {
    defer { waiting = [] }
    return waiting
  }

  /// The one on its way failed or its owner stopped: nothing more is made now; the
  /// waiting ones are returned, to free.
  public mutating func abandon() -> [Capture] {
    busy = false
    return dropWaiting()
  }
}
