import EventLoop
import RelayWebSocket
import RelayPrimitives

/// One client, one message in flight: round trips per second against
/// `relay serve --echo` on 127.0.0.1:PORT.
enum EchoBench {
  static func run(port: Int, seconds: Double) {
    print("== echo round trips over loopback, 32 B text, 1 in flight (median of 3)")
    let rate = median(runs: 3) { roundTrips(port: port, seconds: seconds) }
    print("  \(fmt(rate, 0)) round trips/s")
  }

  static func roundTrips(port: Int, seconds: Double) -> Double {
    let loop = Loop()
    var ws = WebSocketConnection(role: .client, maxMessageBytes: 1 << 20)
    var count = 0
    var start: UInt64 = 0
    var buffered: [UInt8] = []
    var upgraded = false
    let payload = [UInt8](repeating: 0x78, count: 32)
    TCPConnector.connect(loop: loop, host: "127.0.0.1", port: port) { result in
      guard case .success(let tcp) = result else { fatalError("cannot connect to 127.0.0.1:\(port)") }
      let key = Base64.encode([UInt8](repeating: 7, count: 16))
      tcp.write(Array("GET /v1/echo HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: \(key)\r\nSec-WebSocket-Version: 13\r\n\r\n".utf8))
      func feed(_ raw: UnsafeRawBufferPointer) {
        var echoed = 0
        ws.receive(raw) { event in
          if case .text = event { echoed += 1 }
        }
        guard echoed > 0 else { return }
        count += echoed
        if Loop.hrtimeNs() - start > UInt64(seconds * 1e9) {
          tcp.close()
          loop.stop()
        } else {
          tcp.write(ws.encode(.text, payload))
        }
      }
      tcp.onRead = { bytes in
        guard upgraded else {
          buffered += bytes
          guard let end = find(buffered, Array("\r\n\r\n".utf8)) else { return }
          upgraded = true
          start = Loop.hrtimeNs()
          tcp.write(ws.encode(.text, payload))
          let rest = Array(buffered[(end + 4)...])
          rest.withUnsafeBytes { feed($0) }
          return
        }
        feed(bytes)
      }
      tcp.startReading()
    }
    loop.run()
    loop.close()
    return Double(count) / (Double(Loop.hrtimeNs() - start) / 1e9)
  }

  static func find(_ hay: [UInt8], _ needle: [UInt8]) -> Int? {
    guard hay.count >= needle.count else { return nil }
    for i in 0...(hay.count - needle.count) where hay[i..<(i + needle.count)].elementsEqual(needle) { return i }
    return nil
  }
}
