// RelayWebSocket: sans-I/O RFC 6455 (bytes in, events and bytes out).
//
// No sockets, clocks, Foundation or global randomness; SHA-1 is injected.
// How the shell drives it, per TCP connection:
//
// 1. Feed received bytes to an `HTTPHeadParser` until `.complete` (or answer
//    `.invalid(status)` with `HTTPResponse.make(status:close: true)` and
//    close; the shell also enforces the head deadline).
// 2. Route on `head.path`; for a WebSocket endpoint call
//    `WebSocketHandshake.evaluate` with OpenSSL's SHA-1. Send the response;
//    on `.reject` close after sending.
// 3. On `.accept`, create `WebSocketConnection(role: .server, maxMessageBytes:)`
//    and feed it `parser.leftover` first (a client may pipeline frames right
//    behind its upgrade request), then every later read.
// 4. Hot path: `receive(_:onMessage:emit:)` hands each complete message as
//    borrowed bytes (valid only during the call: decode or copy inside it)
//    and allocates nothing per message once warm. `receive(_:emit:)` is the
//    convenience form with owned arrays.
// 5. Write every `.write` event's bytes in order; on `.closed`, flush them
//    and close TCP (RFC 6455 §7.1.1: the server closes first).
// 6. Outbound: `WebSocketFrame.writeHeader` + the shared payload for
//    fan-out (frame once, send to many), `WebSocketFrame.append` into a
//    per-connection buffer, or `connection.encode` (masks in client role).
//    Our own closes (shutdown 1001, policy 4008/4029/4501) come from
//    `connection.close(code:reason:)`; the peer's answering close then
//    yields `.closed`. The shell should still bound that wait with a timer.
