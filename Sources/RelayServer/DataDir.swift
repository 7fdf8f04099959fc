// The file I/O of `--data-dir` (docs/operating.md, "Data dir"), thin over the C
// library: what bytes go where is decided in RelayCluster (DataFile.swift,
// DataDirLayout.swift) and DiskLog.swift. Everything here runs on the loop thread and
// returns errors as values (an errno text), never traps: a full disk or an I/O error
// is an operating condition (§12a), not a bug.
#if canImport(Glibc)
  import Glibc
#endif

/// A failed file operation: what was attempted, on which file, and `strerror`.
struct FileError: Error, CustomStringConvertible {
  var operation: String
  var path: String
  var code: Int32

  init(_ operation: String, _ path: String, code: Int32 = errno) {
    self.operation = operation
    self.path = path
    self.code = code
  }

  var description: String { "\(operation) \(path): \(String(cString: strerror(code)))" }
}

/// The data dir, held open and locked for the life of the process.
final class DataDir {
  let path: String
  private var dirFD: Int32 = -1
  private var lockFD: Int32 = -1

  /// Creates the dir if missing (0700: it holds the ids' seed) and takes `relay.lock`
  /// (`flock`, exclusive, non-blocking): a second relay on the same dir is refused,
  /// and the lock goes with the process however it ends, so a crash leaves none.
  init(path: String) throws(DataDirRefusal) {
    self.path = path
    if mkdir(path, 0o700) != 0 && errno != EEXIST {
      throw DataDirRefusal("cannot create data dir \(path): \(FileError("mkdir", path))")
    }
    dirFD = Glibc.open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
    guard dirFD >= 0 else { throw DataDirRefusal("cannot open data dir: \(FileError("open", path))") }
    lockFD = Glibc.open(file("relay.lock"), O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
    guard lockFD >= 0 else {
      let error = FileError("open", file("relay.lock"))
      close()
      throw DataDirRefusal("cannot open the data dir's lock: \(error)")
    }
    guard flock(lockFD, LOCK_EX | LOCK_NB) == 0 else {
      let busy = errno == EWOULDBLOCK
      let error = FileError("flock", file("relay.lock"))
      close()
      throw DataDirRefusal(
        busy ? "data dir \(path) is in use by another relay (\(path)/relay.lock is locked)" : "cannot lock: \(error)")
    }
  }

  func file(_ name: String) -> String { path + "/" + name }

  func close() {
    if lockFD >= 0 { _ = Glibc.close(lockFD) }
    if dirFD >= 0 { _ = Glibc.close(dirFD) }
    lockFD = -1
    dirFD = -1
  }

  /// The names in the dir (not `.`/`..`).
  func names() throws(FileError) -> [String] {
    guard let dir = opendir(path) else { throw FileError("opendir", path) }
    defer { closedir(dir) }
    var out: [String] = []
    while let entry = readdir(dir) {
      let name = withUnsafeBytes(of: entry.pointee.d_name) { raw in
        String(decoding: raw.prefix(while: { $0 != 0 }), as: UTF8.self)
      }
      if name != "." && name != ".." { out.append(name) }
    }
    return out
  }

  /// The whole file.
  func read(_ name: String) throws(FileError) -> [UInt8] {
    let p = file(name)
    let fd = Glibc.open(p, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { throw FileError("open", p) }
    defer { _ = Glibc.close(fd) }
    // Straight into an array of the file's size (a snapshot may be hundreds of MiB: no
    // chunk copied, no regrowth); whatever the file grew by meanwhile is read after.
    var info = stat()
    let size = fstat(fd, &info) == 0 ? max(0, Int(info.st_size)) : 0
    var failed = false
    var out = [UInt8](unsafeUninitializedCapacity: size) { buffer, count in
      while count < size, let base = buffer.baseAddress {
        let n = Glibc.read(fd, base + count, size - count)
        if n < 0 && errno == EINTR { continue }
        if n <= 0 {
          failed = n < 0
          return
        }
        count += n
      }
    }
    if failed { throw FileError("read", p) }
    var chunk = [UInt8](repeating: 0, count: 1 << 16)
    while true {
      let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if n < 0 && errno == EINTR { continue }
      guard n >= 0 else { throw FileError("read", p) }
      if n == 0 { return out }
      out.append(contentsOf: chunk[0..<n])
    }
  }

  /// What a thread of libuv's pool needs to write into the dir (a snapshot,
  /// DiskLog+Snapshots.swift). The descriptor outlives every such job: the loop runs
  /// until its jobs are done, and the dir is closed only after it.
  var handle: DataDirHandle { DataDirHandle(path: path, fd: dirFD) }

  func writeAtomically(_ name: String, _ bytes: [UInt8]) throws(FileError) {
    try handle.writeAtomically(name, [bytes])
  }

  /// Makes creations, renames and removals in the dir durable.
  func syncDir() throws(FileError) { try handle.syncDir() }

  func remove(_ name: String) { _ = unlink(file(name)) }

  func rename(_ name: String, to other: String) throws(FileError) {
    guard Glibc.rename(file(name), file(other)) == 0 else { throw FileError("rename", file(name)) }
  }

  func truncate(_ name: String, to length: Int) throws(FileError) {
    guard Glibc.truncate(file(name), off_t(length)) == 0 else { throw FileError("truncate", file(name)) }
  }
}

/// The data dir's path and open descriptor, for any thread.
struct DataDirHandle: Sendable {
  let path: String
  let fd: Int32

  func file(_ name: String) -> String { path + "/" + name }

  /// Writes a whole file (`chunks` in order) so it is either absent or complete after
  /// any crash: a temporary name, fsync, rename, fsync of the dir (the rename's own
  /// durability).
  func writeAtomically(_ name: String, _ chunks: [[UInt8]]) throws(FileError) {
    let tmp = file(name + ".tmp")
    let out = try AppendFile(path: tmp, truncate: true)
    do {
      for chunk in chunks { try out.write(chunk) }
      try out.sync()
    } catch {
      out.close()
      _ = unlink(tmp)
      throw error
    }
    out.close()
    guard Glibc.rename(tmp, file(name)) == 0 else {
      let error = FileError("rename", tmp)
      _ = unlink(tmp)
      throw error
    }
    try syncDir()
  }

  func syncDir() throws(FileError) {
    guard fsync(fd) == 0 else { throw FileError("fsync", path) }
  }
}

/// A file written at its end: a log segment, or a snapshot being written.
final class AppendFile {
  let path: String
  private(set) var fd: Int32
  /// Bytes known to be in the file (written in full).
  private(set) var length: Int
  /// `fdatasync`s of it running on libuv's thread pool (`FileSync`): closing waits
  /// for them, so the descriptor is never reused under a sync.
  var syncsInFlight = 0
  var closeWhenSynced = false

  convenience init(dir: DataDir, name: String, truncate: Bool = false) throws(FileError) {
    try self.init(path: dir.file(name), truncate: truncate)
  }

  init(path: String, truncate: Bool = false) throws(FileError) {
    self.path = path
    fd = Glibc.open(path, O_WRONLY | O_CREAT | O_CLOEXEC | (truncate ? O_TRUNC : O_APPEND), 0o600)
    guard fd >= 0 else { throw FileError("open", path) }
    let end = lseek(fd, 0, SEEK_END)
    length = end < 0 ? 0 : Int(end)
  }

  /// All of `bytes`, or an error; a partial write (a file-size limit, a full disk) is
  /// cut back off, so the file ends at a frame boundary again.
  func write(_ bytes: [UInt8]) throws(FileError) {
    var done = 0
    while done < bytes.count {
      let n = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress! + done, $0.count - done) }
      if n < 0 && errno == EINTR { continue }
      guard n > 0 else {
        let error = FileError("write", path, code: n == 0 ? ENOSPC : errno)
        _ = ftruncate(fd, off_t(length))
        throw error
      }
      done += n
    }
    length += bytes.count
  }

  /// `fdatasync`: the data and the size, not the times (the records' own bytes are
  /// what must survive a power loss).
  func sync() throws(FileError) {
    guard fdatasync(fd) == 0 else { throw FileError("fdatasync", path) }
  }

  func close() {
    if syncsInFlight > 0 {
      closeWhenSynced = true
      return
    }
    if fd >= 0 { _ = Glibc.close(fd) }
    fd = -1
  }
}

/// A data dir the relay must not start on (exit 3, with this message).
public struct DataDirRefusal: Error, CustomStringConvertible {
  public var description: String

  init(_ message: String) { description = message }
}
