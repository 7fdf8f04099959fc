// The core's snapshot restore (Sources/RelayCore/SnapshotDecode.swift) on arbitrary
// bytes: a snapshot comes from the shared store and is distrusted like a log entry
// (docs/cluster.md), so any input gives a core or an error, never a trap. A restored
// core is then run through inputs that reach every table (far-future ticks fire every
// deadline; a newcomer joins and calls), so a state the checks let through cannot
// trap later either.
import FuzzDriver
import RelayCore
import RelayProtocol

final class FuzzIDs: IdentifierSource {
  var n = 0
  func token(byteCount: Int) -> String {
    n += 1
    return "fuzz\(n)"
  }
}

let clusterConfig = CoreConfig(devMode: true, serverVersion: "fuzz")

func run(_ core: RelayCore, _ c: ConnectionID, _ json: String, at: Instant) {
  core.receive(c, text: Array(json.utf8), at: at)
}

func fuzzSnapshot(_ input: UnsafeBufferPointer<UInt8>) {
  let bytes = Array(input)
  guard let core = try? RelayCore(restoring: bytes, config: clusterConfig, ids: FuzzIDs(), verifyToken: { _, _ in nil })
  else { return }
  let at = Instant(monoMs: 1 << 52, wallMs: 1 << 52)
  core.tick(at: at)
  // The shell never opens an id twice, nor the reserved UInt64.max.
  let taken = Set(core.openConnectionIDs)
  guard let c = (0..<3).map({ ConnectionID(1 << 60 + $0) }).first(where: { !taken.contains($0) }) else { return }
  core.open(c, at: at)
  run(core, c, #"{"type":"hello","dev":{"uid":"a","name":"A"}}"#, at: at)
  for session in ["s", "s0", "a"] {
    run(core, c, #"{"type":"session.join","session":"\#(session)"}"#, at: at)
    run(core, c, #"{"type":"hand.raise","session":"\#(session)"}"#, at: at)
  }
  run(core, c, #"{"type":"call.initiate","to":["b","c"],"callType":"audio"}"#, at: at)
  for open in core.openConnectionIDs { core.closed(open, clean: open.raw % 2 == 0, at: at) }
  core.tick(at: Instant(monoMs: (1 << 52) + 1_000_000, wallMs: 1 << 52))
  _ = core.takeEffects()
  _ = core.snapshot()
}

runFuzzer { data, size in
  fuzzSnapshot(buffer(data, size))
  return 0
}
