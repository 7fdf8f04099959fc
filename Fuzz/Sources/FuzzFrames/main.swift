// The RFC 6455 frame decoder, server role, on arbitrary bytes fed at split points
// taken from the input: the events must be the same as for the whole input in one
// call (§5.2, §5.4 fragmentation, §8.1 UTF-8, §5.5 control frames), and nothing traps.
import FuzzDriver
import RelayWebSocket

func events(_ bytes: [UInt8], splits: [Int]) -> [String] {
  var ws = WebSocketConnection(role: .server, maxMessageBytes: 4096)
  var out: [String] = []
  var start = 0
  for cut in splits + [bytes.count] where cut >= start {
    ws.receive(Array(bytes[start..<cut])) { out.append("\($0)") }
    start = cut
  }
  return out
}

func fuzzFrames(_ input: UnsafeBufferPointer<UInt8>) {
  guard input.count > 2 else { return }
  // The first two bytes choose the split points; the rest is the stream.
  let bytes = Array(input[2...])
  let n = bytes.count
  let a = Int(input[0]) * n / 256
  let b = a + Int(input[1]) * (n - a) / 256
  let whole = events(bytes, splits: [])
  precondition(whole == events(bytes, splits: [a, b]), "split feed disagrees")
  precondition(whole == events(bytes, splits: Array(stride(from: 1, to: min(n, 64), by: 1))), "byte-wise feed disagrees")
}

runFuzzer { data, size in
  fuzzFrames(buffer(data, size))
  return 0
}
