// RFC 8259 parser on arbitrary bytes: must return a value or an error, never trap,
// and what it accepts must re-encode and parse back to the same value.
import FuzzDriver
import RelayProtocol

func fuzzJSON(_ input: UnsafeBufferPointer<UInt8>) {
  let bytes = Array(input)
  guard let value = try? JSONParser.parse(bytes) else { return }
  let again = try? JSONParser.parse(value.encoded())
  precondition(again == value, "re-encoded JSON does not parse back to the same value")
}

runFuzzer { data, size in
  fuzzJSON(buffer(data, size))
  return 0
}
