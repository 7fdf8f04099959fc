import EventLoop
import RelayCluster
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
  let parts: SnapshotParts
  let position: UInt64
  let id: String
  /// The replica it was taken from, as then: stale if either changed since.
  let epoch: UInt64
  let generation: String
  weak var replica: Replica?
}

/// A snapshot on its way to Redis.
struct SnapshotStore {
  let bytes: [UInt8]
  let digest: [UInt8]
  let position: UInt64
  let id: String

  /// Bytes per command: large enough that a big state takes few round trips, small
  /// enough that no reply waits long behind one and Redis never blocks on a copy.
  static let chunkBytes = 2 << 20

  /// The chunk at `offset`.
  func chunk(at offset: Int) -> ArraySlice<UInt8> { bytes[offset..<min(bytes.count, offset + Self.chunkBytes)] }
}

extension ClusterNode {
  /// The staging key of this node's uploads (its own: a ticker that changes mid-upload
  /// never mixes its chunks with another's). Expires if the upload is abandoned.
  func stagingKey(_ g: String) -> [UInt8] { Self.key("snapshot-staging", "\(g):\(number)") }

  /// Uploads the chunk at `offset`, then the next; after the last, swaps it in.
  func store(_ snapshot: SnapshotStore, generation g: String, offset: Int) {
    guard let commands, generation == g, state == .ready, number != 0 else { return snapshotFinished() }
    if offset >= snapshot.bytes.count && offset > 0 { return swapIn(snapshot, generation: g) }
    let chunk = Array(snapshot.chunk(at: offset))
    let command =
      offset == 0
      ? [Array("SET".utf8), stagingKey(g), chunk, Array("EX".utf8), Array("600".utf8)]
      : [Array("APPEND".utf8), stagingKey(g), chunk]
    commands.send(command) { [weak self] reply in
      guard let self else { return }
      switch reply {
      case .simple?, .integer?:
        self.store(snapshot, generation: g, offset: offset + chunk.count)
      default:
        // The connection ended or Redis refused (OOM): the next interval tries again.
        self.stats.snapshotStoreFailures += 1
        self.snapshotFinished()
      }
    }
  }

  private func swapIn(_ snapshot: SnapshotStore, generation g: String) {
    let batch = LogBatch(node: number, inputs: [.digest(position: snapshot.position, digest: snapshot.digest, stored: true)])
    let keys = [
      Self.generationKey, Self.key("seq", g), Self.key("log", g), Self.key("snapshot", g), Self.key("snapshot-bytes", g),
      stagingKey(g),
    ]
    let args = [
      Array(g.utf8), batch.encoded(), Array(String(snapshot.position).utf8), Array(snapshot.id.utf8),
      Array(Crypto.hex(snapshot.digest).utf8), Array(String(snapshot.bytes.count).utf8),
    ]
    run(.snapshot, keys: keys, args: args) { [weak self] reply in
      guard let self else { return }
      defer { self.snapshotFinished() }
      switch reply?.string {
      case "old"?: break
      case "short"?: self.stats.snapshotStoreFailures += 1
      default:
        if case .bulk? = reply { self.stats.snapshotsStored += 1 }
        self.appended(reply, [])
      }
    }
  }
}
