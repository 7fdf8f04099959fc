import RelayPrimitives
import Testing

/// Bytes from the seeded generator, for round trips.
func seededBytes(_ count: Int, seed: UInt64) -> [UInt8] {
  var random = SeededRandom(seed: seed)
  return (0..<count).map { _ in UInt8(truncatingIfNeeded: random.next()) }
}

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

  @Test func roundTripsEveryLength() {
    for count in 0..<64 {
      let bytes = seededBytes(count, seed: UInt64(count) &+ 100)
      let text = Base64URL.encode(bytes)
      #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
      #expect(Base64URL.decode(text) == bytes)
    }
  }

  @Test(arguments: ["Z", "Zg=", "Zm+v", "Zm/v", "Zm9v\n", "a b"])
  func rejectsMalformed(text: String) {
    #expect(Base64URL.decode(text) == nil)
  }
}

@Suite struct Base64StandardTests {
  @Test(arguments: [
    ("", ""), ("f", "Zg=="), ("fo", "Zm8="), ("foo", "Zm9v"), ("foob", "Zm9vYg=="),
    ("fooba", "Zm9vYmE="), ("foobar", "Zm9vYmFy"),
  ])
  func rfc4648Vectors(plain: String, encoded: String) {
    #expect(Base64.encode(Array(plain.utf8)) == encoded)
    #expect(Base64.decode(encoded) == Array(plain.utf8))
  }

  @Test func roundTripsEveryByte() {
    for count in 0..<40 {
      let bytes = seededBytes(count, seed: UInt64(count))
      #expect(Base64.decode(Base64.encode(bytes)) == bytes)
    }
  }

  @Test(arguments: ["Zg", "Zg=", "Z===", "Zg==Zg==", "Zh==", "Zm9=", "Zm9v\n", "Zm-v", "=Zm9"])
  func rejectsMalformed(text: String) {
    #expect(Base64.decode(text) == nil)
  }
}
