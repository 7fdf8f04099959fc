// RFC 8259 conformance of the parser and writer: valid/invalid corpus, limits,
// strings, numbers, round trips.
import Testing

@testable import RelayProtocol
import RelayPrimitives

func parses(_ text: String) -> Bool { (try? JSONParser.parse(text)) != nil }

func roundTrip(_ text: String) throws -> String {
  String(decoding: try JSONParser.parse(text).encoded(), as: UTF8.self)
}

@Suite struct JSONParserTests {
  @Test func parsesNestedObjectKeepingOrder() throws {
    let value = try JSONParser.parse(#"{"b":1,"a":[true,false,null],"c":{"x":"y"}}"#)
    #expect(value.objectValue?.members.map(\.key) == ["b", "a", "c"])
    #expect(try roundTrip(#"{"b":1,"a":[true,false,null],"c":{"x":"y"}}"#) == #"{"b":1,"a":[true,false,null],"c":{"x":"y"}}"#)
  }

  @Test(arguments: [
    "0", "-0", "1", "-1.5", "1e10", "1E+2", "2.5e-3", "true", "false", "null", #""""#,
    "[]", "{}", " [ 1 , 2 ] ", "\t\n\r{\"a\" : \"b\"}\n", #"[[[]]]"#, #"{"a":{"b":{"c":[]}}}"#,
    #""\"\\\/\b\f\n\r\t""#, #""\u0041\u00e9\u4e2d""#, #""\ud83d\ude00""#, "\"é中😀\"",
    #"{"a":1,"a":2}"#,
  ])
  func acceptsValid(_ text: String) {
    #expect(parses(text), "should accept \(text)")
  }

  @Test(arguments: [
    "", " ", "{", "}", "[", "]", "[1,]", "[,1]", "{,}", #"{"a"}"#, #"{"a":}"#, #"{"a":1,}"#,
    #"{a:1}"#, "{'a':1}", "01", "-", "+1", "1.", ".5", "1e", "1e+", "0x10", "NaN", "Infinity",
    "tru", "nul", "True", #""abc"#, #""\x""#, #""\u12""#, #""\u12G4""#, "\"a\u{1}b\"",
    "\"tab\there\"", "[1 2]", "1 2", "{} {}", #""\ud83d""#, #""\ude00""#, #""\ud83d\u0041""#,
    "[1]x", "\u{FEFF}1",
  ])
  func rejectsInvalid(_ text: String) {
    #expect(!parses(text), "should reject \(text.debugDescription)")
  }

  @Test func rejectsInvalidUTF8() {
    for bytes: [UInt8] in [[0x22, 0xFF, 0x22], [0x22, 0xC3, 0x22], [0x22, 0xED, 0xA0, 0x80, 0x22], [0x22, 0xC0, 0xAF, 0x22]] {
      #expect(throws: JSONError.self) { try JSONParser.parse(bytes) }
    }
  }

  @Test func depthLimit() throws {
    let ok = String(repeating: "[", count: 64) + String(repeating: "]", count: 64)
    #expect(parses(ok))
    let deep = String(repeating: "[", count: 65) + String(repeating: "]", count: 65)
    #expect(throws: JSONError(kind: .tooDeep, offset: 64)) { try JSONParser.parse(deep) }
    let hostile = String(repeating: #"{"a":["#, count: 10_000)
    #expect(throws: JSONError.self) { try JSONParser.parse(hostile) }
    let unclosed = String(repeating: "[", count: 10_000)
    #expect(throws: JSONError.self) { try JSONParser.parse(unclosed) }
  }

  @Test func longStrings() throws {
    let plain = String(repeating: "abcdefgh", count: 60 * 1024 / 8)
    #expect(try JSONParser.parse("\"\(plain)\"") == .string(plain))
    let escaped = String(repeating: #"\n\u00e9"#, count: 10_000)
    let value = try JSONParser.parse("\"\(escaped)\"")
    #expect(value.stringValue?.count == 20_000)
    #expect(try roundTrip("\"\(plain)\"").utf8.count == 60 * 1024 + 2)
  }

  @Test func surrogatePairs() throws {
    #expect(try JSONParser.parse(#""\ud83d\ude00""#) == .string("😀"))
    #expect(try JSONParser.parse(#""x\uD834\uDD1Ey""#) == .string("x𝄞y"))
    #expect(throws: JSONError.self) { try JSONParser.parse(#""\ud83d x""#) }
    #expect(throws: JSONError.self) { try JSONParser.parse(#""\udc00\ud800""#) }
  }

  @Test func hugeNumbersAreKeptVerbatim() throws {
    for text in ["1e400", "-1e400", "123456789012345678901234567890", "0.000000000000000000000000001", "1E-400"] {
      let value = try JSONParser.parse(text)
      #expect(value.numberValue?.text == text)
      #expect(try roundTrip(text) == text)
    }
    #expect(try JSONParser.parse("1e400").numberValue?.double == .infinity)
    #expect(try JSONParser.parse("-1e400").numberValue?.double == -.infinity)
    #expect(try JSONParser.parse("123456789012345678901234567890").numberValue?.int64 == nil)
    #expect(try JSONParser.parse("9223372036854775807").numberValue?.int64 == Int64.max)
    #expect(try JSONParser.parse("1.0").numberValue?.int64 == nil)
    #expect(try JSONParser.parse("-42").numberValue?.int64 == -42)
  }

  @Test func writerEscapesWhatRFC8259Requires() throws {
    let text = "q\" b\\ nl\n cr\r tab\t bs\u{8} ff\u{C} c1\u{1} c1f\u{1F} del\u{7F} /é😀"
    let encoded = String(decoding: JSONValue.string(text).encoded(), as: UTF8.self)
    #expect(encoded == #""q\" b\\ nl\n cr\r tab\t bs\b ff\f c1\u0001 c1f\u001f del\#u{7F} /é😀""#)
    #expect(try JSONParser.parse(encoded) == .string(text))
  }

  @Test func writerFastPathBuildsObjects() {
    var w = JSONWriter()
    w.beginObject()
    w.field("type", "x")
    w.field("n", Int64(-3))
    w.field("ok", true)
    w.optionalField("skip", nil)
    w.key("list")
    w.beginArray()
    w.number(1)
    w.beginObject()
    w.endObject()
    w.string("s")
    w.null()
    w.raw(Array("[2]".utf8))
    w.endArray()
    w.key("empty")
    w.beginArray()
    w.endArray()
    w.endObject()
    #expect(String(decoding: w.bytes, as: UTF8.self) == #"{"type":"x","n":-3,"ok":true,"list":[1,{},"s",null,[2]],"empty":[]}"#)
  }

  @Test func roundTripCorpusIsStable() throws {
    let corpus = [
      #"{"a":[1,2.5,-0,1e-7,{"b":null}],"c":"\u0000"}"#, #"[]"#, #"{}"#, #""""#, "[true,false]",
      #"{"é":"中","k":{"k":{"k":[[],[{}]]}}}"#,
    ]
    for text in corpus {
      let once = try roundTrip(text)
      #expect(try roundTrip(once) == once)
      #expect(try JSONParser.parse(once) == JSONParser.parse(text))
    }
  }
}

@Suite struct RawBufferEntryTests {
  @Test func parsesFromRawMemory() throws {
    let bytes = Array(#"{"type":"ping","id":"r"}"#.utf8)
    let value = try bytes.withUnsafeBytes { (raw) throws(JSONError) in try JSONParser.parse(raw) }
    #expect(value["id"] == .string("r"))
    let envelope = bytes.withUnsafeBytes { CommandDecoder.decode($0) }
    #expect(envelope == .success(Envelope(id: "r", command: .ping)))
    #expect(([] as [UInt8]).withUnsafeBytes { (try? JSONParser.parse($0)) == nil })
  }

  @Test("integers are written digit by digit, extremes included")
  func writerIntegers() {
    for value: Int64 in [0, 7, -7, 10, 1_795_554_467_428, .max, .min, .min + 1] {
      var w = JSONWriter()
      w.number(value)
      #expect(String(decoding: w.bytes, as: UTF8.self) == String(value))
    }
  }

  @Test("ASCII strings skip validation; others are still validated")
  func stringsFastAndChecked() throws {
    #expect(try JSONParser.parse(Array(#"["abc","h\u00e9","né",""]"#.utf8)) == .array([.string("abc"), .string("hé"), .string("né"), .string("")]))
    #expect((try? JSONParser.parse([0x22, 0x61, 0xC3, 0x28, 0x22])) == nil)  // an invalid 2-byte sequence
    #expect((try? JSONParser.parse([0x22, 0xFF, 0x22])) == nil)
  }

  @Test("escaping, eight bytes at a time, round-trips strings of every length and mix")
  func escapingRoundTrips() throws {
    var random = SeededRandom(seed: 11)
    let pool: [Unicode.Scalar] = ["a", "Z", "0", " ", "\"", "\\", "/", "\u{0}", "\u{1F}", "\n", "\t", "\u{7F}", "é", "€", "😀"]
    for length in 0..<40 {
      for _ in 0..<20 {
        var text = ""
        for _ in 0..<length { text.unicodeScalars.append(pool[Int.random(in: 0..<pool.count, using: &random)]) }
        var w = JSONWriter()
        w.string(text)
        let encoded = w.bytes
        #expect(!encoded.contains { $0 < 0x20 })
        #expect(try JSONParser.parse(encoded) == .string(text))
      }
    }
  }
}
