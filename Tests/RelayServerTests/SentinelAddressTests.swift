import RelayCore
import Testing

@testable import RelayRedis
@testable import RelayServer

@Suite struct SentinelAddressTests {
  private typealias HP = SentinelAddress.HostPort

  @Test func parsesTheContractsURLForms() throws {
    let one = try #require(SentinelAddress(url: "redis+sentinel://127.0.0.1:26380/relay"))
    #expect(one.sentinels == [HP(host: "127.0.0.1", port: 26380)])
    #expect(one.masterName == "relay" && one.password == nil && one.db == 0)

    let many = try #require(SentinelAddress(url: "redis+sentinel://:s3cret@10.0.0.1:5000,localhost,[::1]:7/mymaster/3"))
    #expect(many.sentinels == [HP(host: "10.0.0.1", port: 5000), HP(host: "127.0.0.1", port: 26379), HP(host: "::1", port: 7)])
    #expect(many.masterName == "mymaster" && many.password == "s3cret" && many.db == 3)

    let trailing = try #require(SentinelAddress(url: "redis+sentinel://user:p@ss@h/m/"))
    #expect(trailing.password == "p@ss" && trailing.db == 0 && trailing.sentinels == [HP(host: "h", port: 26379)])
  }

  /// Managed Redis: TLS to the sentinels and the primary, ACL users for the primary,
  /// the sentinels' own credentials in the query.
  @Test func readsTLSAndCredentials() throws {
    let s = try #require(
      SentinelAddress(url: "rediss+sentinel://app:pw@h1:1,h2/m/1?sentinel_user=watch&sentinel_password=spw"))
    #expect(s.tls && s.user == "app" && s.password == "pw" && s.sentinelUser == "watch" && s.sentinelPassword == "spw")
    #expect(s.sentinel(1) == RedisAddress(host: "h2", port: 26379, user: "watch", password: "spw", db: 0, tls: true))
    #expect(s.primary(host: "10.0.0.9", port: 6380) == RedisAddress(host: "10.0.0.9", port: 6380, user: "app", password: "pw", db: 1, tls: true))
    let plain = try #require(SentinelAddress(url: "redis+sentinel://h/m"))
    #expect(!plain.tls && plain.sentinelUser == nil && plain.sentinel(0).password == nil)
    for bad in ["redis+sentinel://h/m?x=1", "redis+sentinel://h/m?sentinel_user", "rediss+sentinel://h"] {
      #expect(SentinelAddress(url: bad) == nil, "\(bad)")
    }
  }

  @Test func refusesWhatIsNotSuchAURL() {
    for bad in [
      "", "redis://h:1", "redis+sentinel://", "redis+sentinel://h:1", "redis+sentinel://h:1/", "redis+sentinel:///m",
      "redis+sentinel://h:0/m", "redis+sentinel://h:70000/m", "redis+sentinel://h:1,/m", "redis+sentinel://,h/m",
      "redis+sentinel://h:1/m/x", "redis+sentinel://h:1/m/-1", "redis+sentinel://h:1/m/0/extra", "redis+sentinel://h:x/m",
      "redis+sentinel://h/m n",
    ] {
      #expect(SentinelAddress(url: bad) == nil, "\(bad)")
    }
  }

  @Test func targetPicksTheScheme() {
    #expect(RedisTarget(url: "redis://h:1") == .direct(RedisAddress(host: "h", port: 1, password: nil, db: 0)))
    guard case .sentinel(let s)? = RedisTarget(url: "redis+sentinel://:pw@h:2/m/1") else {
      Issue.record("not a sentinel target")
      return
    }
    #expect(s.primary(host: "10.0.0.9", port: 6380) == RedisAddress(host: "10.0.0.9", port: 6380, password: "pw", db: 1))
    #expect(s.sentinel(0) == RedisAddress(host: "h", port: 2, password: nil, db: 0))
    #expect(RedisTarget(url: "rediss://h:1") == .direct(RedisAddress(host: "h", port: 1, password: nil, db: 0, tls: true)))
    #expect(RedisTarget(url: "http://h:1") == nil)
    #expect(RedisTarget(url: "redis+sentinel://:pw@h:2/m/1")?.description == "sentinel h:2/m")
  }

  @Test func readsTheSentinelsReplies() {
    #expect(SentinelAddress.primaryAddress(fromReply: ["10.0.0.2", "6380"]) == HP(host: "10.0.0.2", port: 6380))
    for bad: [String?] in [[], [nil, nil], ["h"], ["h", "0"], ["h", "65536"], ["", "1"], ["h", "x"], ["h", "1", "2"]] {
      #expect(SentinelAddress.primaryAddress(fromReply: bad) == nil, "\(bad)")
    }
    let s = SentinelAddress(url: "redis+sentinel://h/relay")!
    #expect(s.switchedPrimary(message: "relay 10.0.0.1 6379 10.0.0.2 6380") == HP(host: "10.0.0.2", port: 6380))
    #expect(s.switchedPrimary(message: "other 10.0.0.1 6379 10.0.0.2 6380") == nil)
    #expect(s.switchedPrimary(message: "relay 10.0.0.1 6379 10.0.0.2") == nil)
    #expect(s.switchedPrimary(message: "relay 10.0.0.1 6379 10.0.0.2 http") == nil)
  }

  @Test func minReplicasIsASharedFlagOnlyWhenSet() {
    var config = ServerConfig(core: CoreConfig(devMode: true, serverVersion: "test"))
    config.cluster = ClusterConfig(redis: RedisAddress(host: "h", port: 1, password: nil, db: 0), nodeId: "a")
    let without = config.sharedFlags { $0 }
    #expect(!without.contains("redis-min-replicas"))
    config.cluster?.minReplicas = 1
    #expect(config.sharedFlags { $0 } == without + "\nredis-min-replicas=1")
  }
}
