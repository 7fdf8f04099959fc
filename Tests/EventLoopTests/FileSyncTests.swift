import EventLoop
import Testing

#if canImport(Glibc)
  import Glibc
#endif

@Suite("fdatasync on libuv's thread pool")
struct FileSyncTests {
  @Test("a sync completes on the loop once; a bad descriptor reports its errno")
  func syncs() {
    let fixture = LoopFixture()
    var path = Array("/tmp/relay-filesync-XXXXXX".utf8CString)
    let fd = path.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
    #expect(fd >= 0)
    defer {
      close(fd)
      path.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
    }
    _ = write(fd, "record", 6)
    var results: [Int32] = []
    FileSync.dataSync(fd, on: fixture.loop) { results.append($0) }
    FileSync.dataSync(-1, on: fixture.loop) { results.append($0) }
    fixture.runAndClose()
    #expect(results.sorted() == [-EBADF, 0])
  }
}
