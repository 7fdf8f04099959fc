import Testing

@testable import RelayWebSocket
import RelayPrimitives

@Suite struct Base64URLTests {
  /// RFC 4648 §10 vectors, URL-safe alphabet without padding (§5).
  @Test func vectors() {
    let vectors = ["": "", "f": "Zg", "fo": "Zm8", "foo": "Zm9v", "foob": "Zm9vYg", "fooba": "Zm9vYmE", "foobar": "Zm9vYmFy"]
    for (input, output) in vectors {
      #expect(Base64URL.encode(Array(input.utf8)) == output)
      #expect(Base64URL.decode(output) == Array(input.utf8))
    }
    #expect(Base64URL.encode([0xfb, 0xff]) == "-_8")
  }
}
