// App messages (§7a): fan-out to every member, sender included, rate limited per
// participant with a sliding window.
import RelayProtocol

extension RelayCore {
  /// `message.send {session, data}` → session event `message {from, data}`. `data` arrives
  /// already compact-encoded and size-checked by the decoder, and is spliced verbatim.
  func sendMessage(_ id: String, data: [UInt8], _ request: Request) throws(Refusal) {
    let (session, me) = try memberSession(id, request)
    guard session.acquire(\.message, of: me, at: request.at, limit: config.messageRate, windowMs: config.messageWindowMs)
    else {
      throw Refusal(.rateLimited, "at most \(config.messageRate) messages per \(config.messageWindowMs) ms")
    }
    ok(request)
    emit(session, "message", at: request.at) { w in
      w.field("from", me.uid)
      w.key("data")
      w.raw(data)
    }
  }
}
