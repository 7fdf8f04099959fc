/// Immutable bytes shared by reference between many connections' write queues.
///
/// Fan-out encodes and frames an event once, then enqueues the same buffer to N
/// connections (uWebSockets' `TopicTree`, DESIGN.md "The hot path"): each queue holds
/// a reference, never a copy. The bytes live in their own heap block whose address
/// never changes, which is what `uv_write` needs: libuv copies the `uv_buf_t` array
/// but not the bytes, and those must stay valid until the write callback
/// (`docs/src/stream.rst`). A queue entry keeps the buffer alive until then.
///
/// The class is immutable after `init`, hence safe to share; it is still not
/// `Sendable` because its only consumers are loop-bound.
///
/// The loop also uses it, internally, as a copy chunk (`isCopyChunk`): a block of
/// `Loop.copyChunkBytes` owned by one connection's write queue, into which small
/// frames are copied as they are written (see `Loop.copyLimit`). How much of a chunk
/// is filled is its queue entry's `end`, not `count`.
public final class OutboundBuffer {
  /// Start of the bytes; `count` bytes, or a 1-byte dummy block when empty.
  let base: UnsafeMutableRawPointer
  /// Number of bytes.
  public let count: Int
  /// A connection's copy chunk, never shared: its bytes change while it is queued.
  let isCopyChunk: Bool

  /// Copies `bytes` once into a stable heap block.
  public convenience init(bytes: [UInt8]) {
    self.init(count: bytes.count) { destination in
      bytes.withUnsafeBytes { source in destination.copyMemory(from: source) }
    }
  }

  /// Allocates `count` bytes and lets `initializer` fill them in place, e.g. a frame
  /// header followed by the payload, without an intermediate array. The initializer
  /// must write every byte.
  public init(count: Int, initializer: (UnsafeMutableRawBufferPointer) -> Void) {
    precondition(count >= 0, "OutboundBuffer count must not be negative")
    self.count = count
    self.isCopyChunk = false
    self.base = .allocate(byteCount: max(count, 1), alignment: 16)
    self.owner = nil
    initializer(UnsafeMutableRawBufferPointer(start: base, count: count))
  }

  /// Shares `bytes` instead of copying them: for a buffer of megabytes built off the
  /// loop (a snapshot's upload piece), whose copy and release on the loop would cost
  /// more than the write. The buffer keeps the array, which nobody can mutate any more,
  /// so its storage stays where it is, and `base` points into it.
  public init(sharing bytes: [UInt8]) {
    precondition(!bytes.isEmpty, "a shared buffer holds bytes")
    count = bytes.count
    isCopyChunk = false
    base = bytes.withUnsafeBytes { UnsafeMutableRawPointer(mutating: $0.baseAddress!) }
    owner = bytes
  }

  /// An empty copy chunk of `Loop.copyChunkBytes`, counted by `pool` (see `ChunkPool`).
  init(copyChunkOf pool: ChunkPool) {
    self.count = Loop.copyChunkBytes
    self.isCopyChunk = true
    self.base = .allocate(byteCount: Loop.copyChunkBytes, alignment: 16)
    self.pool = pool
    self.owner = nil
  }

  /// The pool that counts this chunk (nil for every other buffer).
  private weak var pool: ChunkPool?
  /// The array whose storage `base` points into (`init(sharing:)`); nil when `base`
  /// is this buffer's own block.
  private let owner: [UInt8]?

  deinit {
    pool?.chunkGone()
    if owner == nil { base.deallocate() }
  }

  /// Read-only view of the bytes, valid during `body` (for tests and logging).
  public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
    try body(UnsafeRawBufferPointer(start: base, count: count))
  }
}

@available(*, unavailable)
extension OutboundBuffer: Sendable {}
