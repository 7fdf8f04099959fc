// Seeded property tests: random values round-trip through writer and parser, and
// mutated or random input never traps the parser or the command decoder.
import Testing

@testable import RelayProtocol
import RelayPrimitives


func randomString(_ rng: inout SeededRandom) -> String {
  let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\n", "\t", "\u{0}", "\u{1F}", "é", "中", "😀", "\u{2028}", "\u{FFFF}"]
  var s = ""
  for _ in 0..<rng.below(12) { s.unicodeScalars.append(pool[rng.below(pool.count)]) }
  return s
}

func randomValue(_ rng: inout SeededRandom, depth: Int = 0) -> JSONValue {
  switch rng.below(depth > 4 ? 4 : 6) {
  case 0: return .null
  case 1: return .bool(rng.below(2) == 0)
  case 2:
    let numbers = ["0", "-1", "3.25", "1e400", "-0.5E-3", "123456789012345678901234567890", String(Int64(bitPattern: rng.next()))]
    return .number(try! JSONParser.parse(numbers[rng.below(numbers.count)]).numberValue!)
  case 3: return .string(randomString(&rng))
  case 4: return .array((0..<rng.below(4)).map { _ in randomValue(&rng, depth: depth + 1) })
  default:
    var object = JSONObject()
    for _ in 0..<rng.below(4) { object.append(randomString(&rng), randomValue(&rng, depth: depth + 1)) }
    return .object(object)
  }
}

@Suite struct JSONFuzzTests {
  @Test func randomValuesRoundTrip() throws {
    var rng = SeededRandom(state: 99)
    for _ in 0..<2_000 {
      let value = randomValue(&rng)
      let encoded = value.encoded()
      #expect(try JSONParser.parse(encoded) == value)
    }
  }

  @Test func mutatedMessagesNeverTrap() {
    var rng = SeededRandom(state: 7)
    let seeds = [
      #"{"type":"hello","id":"1","dev":{"uid":"a","name":"A"},"resume":{"token":"t","sessions":{"s":3}}}"#,
      #"{"type":"message.send","session":"s","data":{"a":[1,2.5e3,"\u00e9\ud83d\ude00",null,true]}}"#,
      #"{"type":"call.initiate","to":["a","b"],"callType":"audio","metadata":{"k":"v"}}"#,
    ].map { Array($0.utf8) }
    let interesting: [UInt8] = Array(#"{}[]":,\"0-eE.u"#.utf8) + [0, 0x1F, 0x80, 0xC3, 0xED, 0xFF]
    var outcomes = 0
    for _ in 0..<5_000 {
      var bytes = seeds[rng.below(seeds.count)]
      for _ in 0..<(1 + rng.below(4)) {
        let at = rng.below(bytes.count)
        switch rng.below(3) {
        case 0: bytes[at] = interesting[rng.below(interesting.count)]
        case 1: bytes.remove(at: at)
        default: bytes.insert(interesting[rng.below(interesting.count)], at: at)
        }
        if bytes.isEmpty { bytes = [0x7B] }
      }
      switch CommandDecoder.decode(bytes) {
      case .success: outcomes += 1
      case .failure(let error): outcomes += error.code.isBadMessage ? 1 : 0
      }
    }
    #expect(outcomes == 5_000)  // every input decoded or was a bad message
  }

  @Test func randomBytesNeverTrap() {
    var rng = SeededRandom(state: 3)
    for _ in 0..<5_000 {
      let bytes = (0..<rng.below(40)).map { _ in UInt8(truncatingIfNeeded: rng.next()) }
      _ = try? JSONParser.parse(bytes)
      _ = CommandDecoder.decode(bytes)
    }
  }
}
