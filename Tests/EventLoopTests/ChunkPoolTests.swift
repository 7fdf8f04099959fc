import Testing

@testable import EventLoop

@Suite("Copy chunks: a bounded, reused set")
struct ChunkPoolTests {
  @Test("at most `limit` chunks exist; a chunk given back is reused, one dropped makes room")
  func boundedAndReused() {
    let pool = ChunkPool(limit: 3)
    var held = (0..<3).compactMap { _ in pool.take() }
    #expect(held.count == 3)
    #expect(pool.take() == nil)  // the writer then queues its frame by reference
    let returned = held.removeLast()
    pool.give(returned)
    let again = pool.take()
    #expect(again === returned)
    #expect(pool.take() == nil)
    held.removeLast()  // dropped with its queue: freed, and counted out
    let fresh = pool.take()
    #expect(fresh != nil && fresh !== again)
    #expect(pool.take() == nil)
    withExtendedLifetime((held, again, fresh)) {}
  }
}
