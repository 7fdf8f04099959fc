// JWT parsing and claim checks (RFC 7519, PROTOCOL.md §3) on arbitrary token text, with
// a stand-in HMAC that signs everything, so the claim reader is reached with any
// header and payload: huge or fractional `exp`/`nbf`, odd `sessions`, bad base64url.
import FuzzDriver
import RelayProtocol

let acceptAll = JWTVerifier(
  secret: [1, 2, 3], hmac: { _, _ in [] }, equals: { _, _ in true })

func fuzzJWT(_ input: UnsafeBufferPointer<UInt8>) {
  let token = String(decoding: input, as: UTF8.self)
  // Two instants at the ends of the range the relay can see.
  _ = acceptAll.verify(token, nowWallMs: 1_700_000_000_000)
  _ = acceptAll.verify(token, nowWallMs: Int64.max)
}

runFuzzer { data, size in
  fuzzJWT(buffer(data, size))
  return 0
}
