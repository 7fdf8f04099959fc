// Command line of relay-bots: `run` a scenario against the relay (or a plain
// broadcast server) and report; `list` the shipped scenarios.

import ArgumentParser
import RelayCrypto
import EventLoop
import Foundation
import RelayProtocol

@main
struct RelayBots: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "relay-bots",
    abstract: "Simulated clients that load the relay and check what they receive.",
    subcommands: [Run.self, List.self])
}

struct List: ParsableCommand {
  static let configuration = CommandConfiguration(abstract: "Name the shipped scenarios (bots/*.json).")

  func run() throws {
    let shipped = ScenarioLocator.shipped()
    guard !shipped.isEmpty else { throw ValidationError("no bots/ folder found (set RELAY_BOTS_DIR)") }
    let width = shipped.map(\.name.count).max() ?? 0
    for s in shipped { print(s.name + String(repeating: " ", count: width - s.name.count) + "  " + s.description) }
  }
}

struct Run: ParsableCommand {
  static let configuration = CommandConfiguration(abstract: "Run a scenario and report.")

  @Argument(help: "A shipped scenario name (see `list`) or a path to a scenario JSON file.")
  var scenario: String

  @Option(help: ArgumentHelp(
    "WebSocket URL: ws://HOST:PORT/v1/ws (relay) or ws://HOST:PORT (broadcast).",
    discussion: "Repeat it to spread the bots round-robin over several relay nodes (cluster mode); "
      + "a bot whose connection drops resumes on the next URL."))
  var url: [String] = []

  @Flag(help: "Dev-mode identity: hello {dev: {uid, name, role}}.")
  var dev = false

  @Option(help: "Relay secret: mint HS256 tokens for the bots.")
  var secret: String?

  @Option(help: "Override the scenario's run duration (ms, after ramp-up).")
  var duration: Int?

  @Option(help: "Write every figure of the report to this JSON file.")
  var json: String?

  @Option(name: .customLong("protocol"), help: "relay | broadcast")
  var wire: String = "relay"

  @Option(help: "Run only shard K of N of the population, as K/N (split big runs across processes).")
  var shard: String = "0/1"

  @Option(help: "Seed for the bots' random choices.")
  var seed: UInt64 = 1

  @Option(help: "Log every message one bot (by uid, e.g. u3) sends and receives, to stderr.")
  var trace: String?

  @Option(help: "PEM file of the CA (or self-signed certificate) to trust for wss:// URLs.")
  var ca: String?

  @Flag(help: "wss:// without verifying the relay's certificate (self-signed test setups).")
  var insecure = false

  @Flag(help: "No live progress line.")
  var quiet = false

  @Option(help: ArgumentHelp(
    "Test the checks: drop-message:N or duplicate-message:N (every Nth message event received).",
    visibility: .hidden))
  var fault: String?

  func validate() throws {
    guard !url.isEmpty else { throw ValidationError("give --url at least once") }
    for u in url where WebSocketURL(u) == nil {
      throw ValidationError("--url must look like ws://127.0.0.1:8080/v1/ws or wss://… (got \(u))")
    }
    guard WireProtocol(rawValue: wire) != nil else { throw ValidationError("--protocol is relay or broadcast") }
    if wire == "relay" && dev == (secret != nil) { throw ValidationError("give exactly one of --dev or --secret") }
    guard parseShard() != nil else { throw ValidationError("--shard must be K/N with 0 ≤ K < N") }
    if let fault, Fault(fault) == nil { throw ValidationError("--fault is drop-message:N or duplicate-message:N") }
  }

  private func parseShard() -> (Int, Int)? {
    let parts = shard.split(separator: "/").compactMap { Int($0) }
    guard parts.count == 2, parts[1] >= 1, parts[0] >= 0, parts[0] < parts[1] else { return nil }
    return (parts[0], parts[1])
  }

  func run() throws {
    let scenario = try Scenario.load(nameOrPath: self.scenario)
    let (k, n) = parseShard()!
    var options = RunOptions(
      urls: url.map { WebSocketURL($0)! }, wire: WireProtocol(rawValue: wire)!,
      identity: secret.map { .token(TokenMinter(secret: Array($0.utf8))) } ?? .dev,
      durationMs: duration)
    options.shardIndex = k
    options.shardCount = n
    options.seed = seed
    options.progress = !quiet
    options.traceUid = trace
    options.fault = fault.flatMap(Fault.init)
    if options.urls.contains(where: \.secure) {
      do {
        options.tls = try TLSContext(clientWithCA: ca, verify: !insecure)
      } catch {
        throw ValidationError("--ca: \(error)")
      }
    }
    let failures = try RunCommand.execute(scenario: scenario, options: options, jsonPath: json)
    if failures > 0 { throw ExitCode(1) }
  }
}

enum RunCommand {
  /// Sockets beyond the bots' own: the loop, stdio, a margin for libuv.
  static let fdMargin = 64

  /// Runs the scenario to completion and prints the report; returns the
  /// number of failed checks.
  static func execute(scenario: Scenario, options: RunOptions, jsonPath: String?) throws -> Int {
    let botCount = (0..<scenario.population.total).filter { $0 % options.shardCount == options.shardIndex }.count
    // Bots reconnecting while their silent predecessor is still open hold
    // two sockets; the margin covers that and the loop's own descriptors.
    let limit = Loop.raiseOpenFileLimit(to: 20_000)
    guard botCount + fdMargin <= limit else {
      throw ValidationError(
        "scenario '\(scenario.name)' needs \(botCount) connections but this process may open \(limit) files "
          + "(\(fdMargin) kept back); split it with --shard K/N across processes")
    }
    let loop = Loop()
    let ctx = RunContext(loop: loop, scenario: scenario, options: options)
    let engine = Engine(ctx: ctx)
    if !scenario.relayFlags.isEmpty { log("scenario expects relay flags: \(scenario.relayFlags.joined(separator: " "))") }
    engine.run()
    let report = Report(ctx: ctx, engine: engine, botCount: botCount)
    print(report.table)
    if let jsonPath {
      let text = String(decoding: report.json.encoded(), as: UTF8.self) + "\n"
      try text.write(toFile: jsonPath, atomically: true, encoding: .utf8)
    }
    loop.close()
    return ctx.checker.totalFailures
  }
}
