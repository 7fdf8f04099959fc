import Testing

@testable import RelayProtocol

@Suite struct JSONParserTests {
  @Test func parsesNestedObjectKeepingOrder() throws {
    let value = try JSONParser.parse(#"{"b":1,"a":[true,false,null],"c":{"x":"y"}}"#)
    #expect(value.objectValue?.members.map(\.key) == ["b", "a", "c"])
    #expect(String(decoding: value.encoded(), as: UTF8.self) == #"{"b":1,"a":[true,false,null],"c":{"x":"y"}}"#)
  }
}
