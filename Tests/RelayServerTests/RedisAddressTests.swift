import Testing

@testable import RelayRedis
@testable import RelayServer

@Suite struct RedisAddressTests {
  @Test func parsesTheContractsURLForms() {
    #expect(RedisAddress(url: "redis://127.0.0.1:6380") == make("127.0.0.1", 6380, nil, 0))
    #expect(RedisAddress(url: "redis://localhost")?.host == "127.0.0.1")
    #expect(RedisAddress(url: "redis://localhost")?.serverName == "localhost")
    #expect(RedisAddress(url: "redis://:s3cret@10.0.0.5:7000/3") == make("10.0.0.5", 7000, "s3cret", 3))
    #expect(RedisAddress(url: "redis://user:pw@h:1/") == make("h", 1, "pw", 0, user: "user"))
    #expect(RedisAddress(url: "redis://[::1]:6379/1") == make("::1", 6379, nil, 1))
    #expect(RedisAddress(url: "redis://:p@ss@127.0.0.1:1") == make("127.0.0.1", 1, "p@ss", 0))
  }

  /// Managed Redis (contract §12): TLS by scheme, ACL users, the certificate checked
  /// against the name the URL gave.
  @Test func readsTLSAndACLUsers() throws {
    let a = try #require(RedisAddress(url: "rediss://relay:s3:cr@t@localhost:6380/2"))
    #expect(a.tls && a.user == "relay" && a.password == "s3:cr@t" && a.db == 2 && a.port == 6380)
    #expect(a.host == "127.0.0.1" && a.serverName == "localhost")
    #expect(a.setupCommands == [["AUTH", "relay", "s3:cr@t"], ["SELECT", "2"]])
    #expect(RedisAddress(url: "redis://:pw@h")?.setupCommands == [["AUTH", "pw"]])
    #expect(RedisAddress(url: "redis://pw@h")?.setupCommands == [["AUTH", "pw"]])
    #expect(RedisAddress(url: "redis://h")?.setupCommands == [])
    #expect(RedisAddress(url: "redis://h")?.tls == false)
  }

  @Test func refusesWhatIsNotSuchAURL() {
    for bad in ["", "http://h:1", "redisss://h", "rediss://", "redis://", "redis://h:0", "redis://h:70000", "redis://h:x", "redis://h:1/-1",
                "redis://h:1/db"] {
      #expect(RedisAddress(url: bad) == nil, "\(bad)")
    }
  }

  private func make(_ host: String, _ port: Int, _ password: String?, _ db: Int, user: String? = nil) -> RedisAddress {
    RedisAddress(host: host, port: port, user: user, password: password, db: db)
  }
}
