import EventLoop
import RelayCluster
import RelayClusterDriver
import RelayCore
import RelayCrypto

// Storing a snapshot of any size without a long Redis reply (docs/cluster.md,
// "Bounded history"): the ticker uploads the bytes in chunks into a staging key of
// its own (`SET … EX` then `APPEND`, one chunk in flight, so every reply is one
// chunk's and the appends of the node interleave), then one script checks the
// staged length, renames the staging key over the snapshot's bytes key, records
// position, stream id and digest, trims the log behind the previous snapshot and
// appends the `digest` record — the swap is atomic, so a reader sees the old
// snapshot or the new one, never a mix.

/// A snapshot taken on the loop at `position`, to be joined and digested off it.
struct SnapshotCapture {
  /// Taken by the thread pool's join (or released there when superseded).
  let parts: Handoff<SnapshotParts>
  let position: UInt64
  let id: String
  /// The replica it was taken from, as then: stale if either changed since.
  let epoch: UInt64
  let generation: String
  weak var replica: Replica?
}

/// What the thread pool hands back: the pieces in a box, so that the loop holds them
/// only while it uploads them and they are freed on the pool again.
struct SnapshotJoined: Sendable {
  let pieces: Handoff<[[UInt8]]>
  let digest: [UInt8]
  let ns: UInt64
}

/// A snapshot on its way to Redis, in pieces of `chunkBytes` (the last one shorter):
/// each piece is one command's payload, written by reference.
final class SnapshotStore {
  private(set) var pieces: [[UInt8]]
  /// The snapshot's length.
  let count: Int
  let digest: [UInt8]
  let position: UInt64
  let id: String

  init(pieces: [[UInt8]], digest: [UInt8], position: UInt64, id: String) {
    self.pieces = pieces
    count = pieces.reduce(0) { $0 + $1.count }
    self.digest = digest
    self.position = position
    self.id = id
  }

  /// Bytes per command: large enough that a big state takes few round trips, small
  /// enough that no reply waits long behind one and Redis never blocks on a copy.
  static let chunkBytes = 2 << 20

  /// The pieces, for the thread pool to free (`Loop.release`); none are left here.
  func takePieces() -> Handoff<[[UInt8]]> {
    let taken = pieces
    pieces = []
    return Handoff(taken)
  }
}

extension ClusterNode {
  /// The staging key of this node's uploads (its own: a ticker that changes mid-upload
  /// never mixes its chunks with another's). Expires if the upload is abandoned.
  func stagingKey(_ g: String) -> [UInt8] { Self.key("snapshot-staging", "\(g):\(number)") }

  /// Uploads the snapshot piece by piece, then swaps it in (`SnapshotUpload` decides
  /// each step; this sends it and feeds back the reply).
  func store(_ snapshot: SnapshotStore, generation g: String) {
    var upload = SnapshotUpload(pieces: snapshot.pieces.count)
    let first = upload.start(mayStore: mayStore(g))
    perform(first, upload, snapshot, g)
  }

  private func mayStore(_ g: String) -> Bool { commands != nil && generation == g && state == .ready && number != 0 }

  private func perform(_ step: SnapshotUpload.Step, _ upload: SnapshotUpload, _ snapshot: SnapshotStore, _ g: String) {
    let next: (SnapshotUpload.Reply) -> Void = { [weak self] reply in
      guard let self else { return }
      var upload = upload
      let step = upload.handle(reply, mayStore: self.mayStore(g))
      self.perform(step, upload, snapshot, g)
    }
    switch step {
    case .set:
      commands?.send(
        [Array("SET".utf8), stagingKey(g)], payload: snapshot.pieces.first ?? [],
        after: [Array("EX".utf8), Array("600".utf8)]) { next(Self.staged($0)) }
    case .append(let piece):
      commands?.send([Array("APPEND".utf8), stagingKey(g)], payload: snapshot.pieces[piece], after: []) {
        next(Self.staged($0))
      }
    case .swap:
      swapIn(snapshot, generation: g) { [weak self] reply in
        switch reply?.string {
        case "old"?: next(.old)
        case "short"?: next(.short)
        default:
          // The `digest` record's append: its reply says what any append's says.
          self?.appended(reply, [])
          if case .bulk? = reply { next(.swapped) } else { next(.refused) }
        }
      }
    case .finished(let outcome):
      switch outcome {
      case .stored: stats.snapshotsStored += 1
      case .short, .failed: stats.snapshotStoreFailures += 1
      case .superseded, .abandoned: break
      }
      storeFinished(snapshot)
    }
  }

  private static func staged(_ reply: RESPValue?) -> SnapshotUpload.Reply {
    switch reply {
    case .simple?, .integer?: .staged
    default: .refused  // the connection ended or Redis refused (OOM)
    }
  }

  private func swapIn(_ snapshot: SnapshotStore, generation g: String, _ done: @escaping (RESPValue?) -> Void) {
    let batch = LogBatch(node: number, inputs: [.digest(position: snapshot.position, digest: snapshot.digest, stored: true)])
    let keys = [
      Self.generationKey, Self.key("seq", g), Self.key("log", g), Self.key("snapshot", g), Self.key("snapshot-bytes", g),
      stagingKey(g),
    ]
    let args = [
      Array(g.utf8), batch.encoded(), Array(String(snapshot.position).utf8), Array(snapshot.id.utf8),
      Array(Crypto.hex(snapshot.digest).utf8), Array(String(snapshot.count).utf8),
    ]
    run(.snapshot, keys: keys, args: args, done)
  }
}
