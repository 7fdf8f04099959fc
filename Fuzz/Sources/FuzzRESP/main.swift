// The RESP2 reply parser (the cluster bus's reader of Redis replies, untrusted input)
// on arbitrary bytes fed at split points taken from the input: the replies and the
// error that ends the stream must be the same however the bytes are split, and
// nothing traps, recurses without bound or allocates from a declared size. Small
// limits put the bounds (nesting, lengths, reply size) within reach of short inputs.
import FuzzDriver
import RESPCodec

func replies(_ bytes: [UInt8], splits: [Int], parser: RESPParser) -> [String] {
  var parser = parser
  var out: [String] = []
  var start = 0
  do {
    for cut in splits + [bytes.count] where cut >= start {
      parser.feed(bytes[start..<cut])
      start = cut
      while let value = try parser.next() { out.append("\(value)") }
    }
  } catch {
    out.append("error: \(error.message)")
  }
  return out
}

func fuzzRESP(_ input: UnsafeBufferPointer<UInt8>) {
  guard input.count > 2 else { return }
  // The first two bytes choose the split points; the rest is the stream.
  let bytes = Array(input[2...])
  let n = bytes.count
  let a = Int(input[0]) * n / 256
  let b = a + Int(input[1]) * (n - a) / 256
  for parser in [RESPParser(maxLength: 64, maxDepth: 3), RESPParser()] {
    let whole = replies(bytes, splits: [], parser: parser)
    precondition(whole == replies(bytes, splits: [a, b], parser: parser), "split feed disagrees")
    precondition(whole == replies(bytes, splits: Array(0..<n), parser: parser), "byte-wise feed disagrees")
  }
}

runFuzzer { data, size in
  fuzzRESP(buffer(data, size))
  return 0
}
