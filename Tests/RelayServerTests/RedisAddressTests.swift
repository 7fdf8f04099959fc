import Testing

@testable import RelayServer

@Suite struct RedisAddressTests {
  @Test func parsesTheContractsURLForms() {
    #expect(RedisAddress(url: "redis://127.0.0.1:6380") == make("127.0.0.1", 6380, nil, 0))
    #expect(RedisAddress(url: "redis://localhost") == make("127.0.0.1", 6379, nil, 0))
    #expect(RedisAddress(url: "redis://:s3cret@10.0.0.5:7000/3") == make("10.0.0.5", 7000, "s3cret", 3))
    #expect(RedisAddress(url: "redis://user:pw@h:1/") == make("h", 1, "pw", 0))
    #expect(RedisAddress(url: "redis://[::1]:6379/1") == make("::1", 6379, nil, 1))
    #expect(RedisAddress(url: "redis://:p@ss@127.0.0.1:1") == make("127.0.0.1", 1, "p@ss", 0))
  }

  @Test func refusesWhatIsNotSuchAURL() {
    for bad in ["", "http://h:1", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x", "redis://h:1/-1",
                "redis://h:1/db"] {
      #expect(RedisAddress(url: bad) == nil, "\(bad)")
    }
  }

  private func make(_ host: String, _ port: Int, _ password: String?, _ db: Int) -> RedisAddress {
    var a = RedisAddress(url: "redis://x")!
    a.host = host
    a.port = port
    a.password = password
    a.db = db
    return a
  }
}
