// The HTTP/1.1 request-head parser (RFC 9112) on arbitrary bytes, fed whole and then
// again split at a point taken from the input: both feeds must agree.
import FuzzDriver
import RelayWebSocket

func outcome(_ result: HTTPHeadParseResult) -> String {
  switch result {
  case .needMore: return "incomplete"
  case .invalid(let status): return "invalid \(status)"
  case .complete(let head, let bodyStart):
    return "complete \(head.method) \(head.target) \(head.versionMinor) \(head.headers.map { "\($0.name)=\($0.value)" }) \(bodyStart)"
  }
}

func fuzzHTTPHead(_ input: UnsafeBufferPointer<UInt8>) {
  let bytes = Array(input)
  var whole = HTTPHeadParser(maxHeadBytes: 8192)
  let once = outcome(whole.feed(bytes))
  let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
  var parts = HTTPHeadParser(maxHeadBytes: 8192)
  var twice = outcome(parts.feed(Array(bytes[..<split])))
  if twice == "incomplete" { twice = outcome(parts.feed(Array(bytes[split...]))) }
  precondition(once == twice, "split feed disagrees: \(once) vs \(twice)")
}

runFuzzer { data, size in
  fuzzHTTPHead(buffer(data, size))
  return 0
}
