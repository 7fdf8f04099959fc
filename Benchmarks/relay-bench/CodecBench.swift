import EventLoop
import RelayWebSocket

/// Server-side decode of masked client frames: header parse, unmask, UTF-8 check.
enum CodecBench {
  static func run() {
    print("== codec: server decode of masked text frames (median of 5)")
    for size in [16, 256, 65_536] {
      let mbps = median { decodeMBps(messageSize: size) }
      print("  \(size) B messages: \(fmt(mbps)) MB/s")
    }
  }

  /// Feeds ~64 MiB of masked frames in 64 KiB reads, like a socket would.
  static func decodeMBps(messageSize: Int) -> Double {
    let text = [UInt8]((0..<messageSize).map { UInt8(0x61 + $0 % 26) })
    var client = WebSocketConnection(role: .client, maxMessageBytes: 1 << 20)
    let one = client.encode(.text, text)
    let perChunk = max(1, 65_536 / one.count)
    var chunk: [UInt8] = []
    for _ in 0..<perChunk { chunk += client.encode(.text, text) }
    let rounds = max(1, (64 << 20) / chunk.count)
    var server = WebSocketConnection(role: .server, maxMessageBytes: 1 << 20)
    var messages = 0
    let start = Loop.hrtimeNs()
    chunk.withUnsafeBytes { raw in
      for _ in 0..<rounds {
        server.receive(raw) { event in
          if case .text = event { messages += 1 }
        }
      }
    }
    let elapsed = seconds(since: start)
    precondition(messages == rounds * perChunk, "decoded \(messages) of \(rounds * perChunk)")
    return Double(rounds * chunk.count) / elapsed / 1e6
  }
}
