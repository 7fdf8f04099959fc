// relay-bench: prints figures; never part of `swift test`. Each figure is the
// median of several runs (the machine is shared and noisy).
//   relay-bench codec            frame decode + unmask + UTF-8 validate, MB/s
//   relay-bench core             core raise/lower churn in a 1 000-member session
//   relay-bench churn            the churn alone, once (for instruction counts)
//   relay-bench ring             ringing storm on the core, every outcome
//   relay-bench tick             heartbeat check cost (the shell machine) at 5 000 vs 19 900 connections
//   relay-bench snapshot [replay|participants [SxM]]  a cluster snapshot's capture (on the loop) and join
//   relay-bench echo PORT [SEC]  echo round trips/s against `relay serve --echo`
import EventLoop
#if canImport(Glibc)
  import Glibc
#endif

let args = Array(CommandLine.arguments.dropFirst())
switch args.first ?? "all" {
case "codec": CodecBench.run()
case "core": CoreBench.run()
case "churn": print("churn: \(CoreBench.churn(commands: 20_000).1) recipients per event")
case "ring": RingBench.run()
case "tick": TickBench.run()
case "snapshot": SnapshotBench.run(only: args.count > 1 ? args[1] : nil, size: args.count > 2 ? args[2] : nil)
case "echo":
  guard args.count >= 2, let port = Int(args[1]) else {
    print("usage: relay-bench echo PORT [SECONDS]")
    exit(2)
  }
  EchoBench.run(port: port, seconds: args.count > 2 ? Double(args[2]) ?? 3 : 3)
case "all":
  CodecBench.run()
  CoreBench.run()
  RingBench.run()
  TickBench.run()
default:
  print("usage: relay-bench [codec|core|churn|ring|tick|snapshot|echo PORT [SECONDS]|all]")
  exit(2)
}

/// Runs `body` `runs` times and returns the median of the values it reports.
func median(runs: Int = 5, _ body: () -> Double) -> Double {
  let values = (0..<runs).map { _ in body() }.sorted()
  return values[values.count / 2]
}

func seconds(since startNs: UInt64) -> Double { Double(Loop.hrtimeNs() - startNs) / 1e9 }

func fmt(_ v: Double, _ digits: Int = 1) -> String {
  var p = 1.0
  for _ in 0..<digits { p *= 10 }
  let r = (v * p).rounded() / p
  return String(r)
}
