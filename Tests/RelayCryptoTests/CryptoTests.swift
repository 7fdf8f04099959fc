import RelayCrypto
import Testing

@Suite("RelayCrypto")
struct CryptoTests {
  @Test("SHA-1 of \"abc\" (FIPS 180-2 example)")
  func sha1OfABC() {
    #expect(Crypto.hex(Crypto.sha1(Array("abc".utf8))) == "a9993e364706816aba3e25717850c26c9cd0d89d")
    #expect(Crypto.hex(Crypto.sha1([])) == "da39a3ee5e6b4b0d3255bfef95601890afd80709")
  }

  @Test("Sec-WebSocket-Accept of the RFC 6455 §1.3 example key")
  func webSocketAccept() {
    let key = "dGhlIHNhbXBsZSBub25jZQ=="
    let digest = Crypto.sha1(Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8))
    #expect(Crypto.hex(digest) == "b37a4f2cc0624f1690f64606cf385945b2bec4ea")  // s3pPLMBiTxaQ9kYGzzhZRbK+xOo=
  }

  @Test("SHA-256 of \"abc\" and of nothing (FIPS 180-2 examples)")
  func sha256OfABC() {
    #expect(
      Crypto.hex(Crypto.sha256(Array("abc".utf8)))
        == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad")
    #expect(Crypto.hex(Crypto.sha256([])) == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855")
  }

  @Test("SHA-256 over pieces is the SHA-256 of their bytes joined, however split")
  func sha256OfPieces() {
    #expect(Crypto.sha256(pieces: [Array("a".utf8), [], Array("bc".utf8)]) == Crypto.sha256(Array("abc".utf8)))
    #expect(Crypto.sha256(pieces: []) == Crypto.sha256([]))
    let bytes = (0..<10_000).map { UInt8(truncatingIfNeeded: $0 &* 7) }
    let split = stride(from: 0, to: bytes.count, by: 777).map { Array(bytes[$0..<min(bytes.count, $0 + 777)]) }
    #expect(Crypto.sha256(pieces: split) == Crypto.sha256(bytes))
  }

  @Test("HMAC-SHA256, RFC 4231 test cases 1 and 2")
  func hmacRFC4231() {
    let case1 = Crypto.hmacSHA256(key: [UInt8](repeating: 0x0b, count: 20), message: Array("Hi There".utf8))
    #expect(Crypto.hex(case1) == "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7")
    let case2 = Crypto.hmacSHA256(key: Array("Jefe".utf8), message: Array("what do ya want for nothing?".utf8))
    #expect(Crypto.hex(case2) == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
    #expect(Crypto.hmacSHA256(key: [], message: []).count == 32)
  }

  @Test("constantTimeEqual")
  func constantTimeEqual() {
    #expect(Crypto.constantTimeEqual([1, 2, 3], [1, 2, 3]))
    #expect(!Crypto.constantTimeEqual([1, 2, 3], [1, 2, 4]))
    #expect(!Crypto.constantTimeEqual([1, 2, 3], [1, 2]))
    #expect(Crypto.constantTimeEqual([], []))
  }

  @Test("random bytes and URL-safe tokens")
  func randomTokens() {
    #expect(Crypto.randomBytes(0).isEmpty)
    #expect(Crypto.randomBytes(32).count == 32)
    #expect(Crypto.randomBytes(32) != Crypto.randomBytes(32))
    let token = Crypto.randomToken(byteCount: 16)
    #expect(token.count == 22)
    let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    #expect(token.allSatisfy { allowed.contains($0) })
    #expect(Crypto.randomToken(byteCount: 32).count == 43)
  }

  @Test("the pool hands out every byte once, across block refills, and never repeats a token")
  func randomPool() {
    let pool = Crypto.RandomPool()
    var seen = Set<String>()
    var total = 0
    for i in 0..<2_000 {
      let count = [16, 24, 32, 5000][i % 4]
      let bytes = pool.bytes(count)
      #expect(bytes.count == count)
      total += count
      if count == 24 { #expect(seen.insert(Crypto.hex(bytes)).inserted) }
    }
    #expect(total > 4096 * 3)  // several refills, including one larger than a block
    #expect(pool.token(byteCount: 24).count == 32)
  }

  @Test("hex encoding")
  func encodings() {
    #expect(Crypto.hex([0x00, 0x7f, 0xff]) == "007fff")
  }
}
