// Scenario files: what a run does (population, ramp, behaviours, duration).
// The format is documented in bots/README.md; this file turns the JSON into
// typed values and rejects anything it does not understand, so a typo in a
// scenario fails loudly instead of silently running something else.

import Foundation
import RelayProtocol

/// Who connects: `sessions` × `members` bots, the first `hosts` of each session
/// with role "host". A bot belongs to exactly one session.
struct Population {
  var sessions: Int
  var members: Int
  var hosts: Int
  var sessionPrefix: String
  var total: Int { sessions * members }
}

/// One behaviour and how often it happens. Rates are totals per second across
/// the whole population (so a scenario states the load it offers directly).
struct Behaviour {
  enum Kind: String, CaseIterable {
    case hand  // raise if down, lower if up
    case hostLower = "host-lower"  // a host lowers someone's hand or all hands
    case message  // message.send at a fixed total rate
    case publish  // per-session publishers keeping N messages in flight
    case churn  // session.leave, then session.join after `afterMs`
    case vanish  // stop reading and answering pings, resume after `afterMs`
    case abrupt  // TCP reset (no close frame), resume after `afterMs`
    case background  // client.background true, vanish, resume after `afterMs`
    case ring  // call.initiate to `callees` random members with an answer mix
  }

  var kind: Kind
  var perSecond: Double
  var afterMs: Int
  /// Resume after the relay's grace instead of within it (fresh join expected).
  var afterGrace: Bool
  var callees: Int
  var mix: [String: Double]
  var talkMs: Int
  var publishersPerSession: Int
  var inflight: Int
}

/// A whole scenario as loaded from `bots/NAME.json` or a path.
struct Scenario {
  var name: String
  var description: String
  var durationMs: Int
  var quietMs: Int
  var rampPerSecond: Double
  var population: Population
  var payloadBytes: Int
  var graceMs: Int
  var backgroundGraceMs: Int
  var behaviours: [Behaviour]
  /// Error codes that are an expected outcome of this scenario's load
  /// (e.g. `conflict` when calls race); any other `error` fails the run.
  var allowedErrors: Set<String>
  /// Flags the relay should run with for the scenario to make sense; printed
  /// in the report and used by Benchmarks/run.sh.
  var relayFlags: [String]

  /// Messages one bot may send per second: under the relay's `--message-rate`
  /// (§7a, default 20 per 1 000 ms) as the scenario starts the relay, one below it
  /// so timer jitter never trips the limit.
  var messagesPerBotPerSecond: Int {
    var rate = 20
    if let i = relayFlags.firstIndex(of: "--message-rate"), i + 1 < relayFlags.count, let n = Int(relayFlags[i + 1]) { rate = n }
    return max(1, rate - 1)
  }

  func has(_ kind: Behaviour.Kind) -> Bool { behaviours.contains { $0.kind == kind } }
}

struct ScenarioError: Error, CustomStringConvertible {
  let description: String
}

extension Scenario {
  static func load(nameOrPath: String) throws -> Scenario {
    let url = try ScenarioLocator.resolve(nameOrPath)
    let data = try Data(contentsOf: url)
    let json: JSONValue
    do { json = try JSONParser.parse(Array(data)) } catch {
      throw ScenarioError(description: "\(url.path): \(error)")
    }
    return try decode(json, fallbackName: url.deletingPathExtension().lastPathComponent)
  }

  static func decode(_ json: JSONValue, fallbackName: String) throws -> Scenario {
    guard let members = json.objectMembers else { throw ScenarioError(description: "not an object") }
    let known: Set<String> = [
      "name", "description", "durationMs", "quietMs", "rampPerSecond", "population",
      "payloadBytes", "graceMs", "backgroundGraceMs", "behaviours", "allowedErrors", "relayFlags", "notes",
    ]
    for (k, _) in members where !known.contains(k) {
      throw ScenarioError(description: "unknown scenario field '\(k)'")
    }
    let pop = try decodePopulation(json["population"])
    let behaviours = try (json["behaviours"]?.arrayValue ?? []).map(decodeBehaviour)
    return Scenario(
      name: json["name"]?.stringValue ?? fallbackName,
      description: json["description"]?.stringValue ?? "",
      durationMs: json["durationMs"]?.int ?? 5_000,
      quietMs: json["quietMs"]?.int ?? 1_000,
      rampPerSecond: json["rampPerSecond"]?.double ?? 500,
      population: pop,
      payloadBytes: json["payloadBytes"]?.int ?? 30,
      graceMs: json["graceMs"]?.int ?? 30_000,
      backgroundGraceMs: json["backgroundGraceMs"]?.int ?? 120_000,
      behaviours: behaviours,
      allowedErrors: Set((json["allowedErrors"]?.arrayValue ?? []).compactMap(\.stringValue)),
      relayFlags: (json["relayFlags"]?.arrayValue ?? []).compactMap(\.stringValue))
  }

  private static func decodePopulation(_ json: JSONValue?) throws -> Population {
    guard let json else { throw ScenarioError(description: "missing 'population'") }
    let sessions = json["sessions"]?.int ?? 1
    let members = json["members"]?.int ?? 2
    guard sessions >= 1, members >= 1 else {
      throw ScenarioError(description: "population needs ≥ 1 session and ≥ 1 member")
    }
    return Population(
      sessions: sessions, members: members, hosts: json["hosts"]?.int ?? 0,
      sessionPrefix: json["sessionPrefix"]?.stringValue ?? "s")
  }

  private static func decodeBehaviour(_ json: JSONValue) throws -> Behaviour {
    guard let kindName = json["kind"]?.stringValue, let kind = Behaviour.Kind(rawValue: kindName) else {
      let names = Behaviour.Kind.allCases.map(\.rawValue).joined(separator: ", ")
      throw ScenarioError(description: "behaviour needs a 'kind' among: \(names)")
    }
    var mix: [String: Double] = [:]
    for (k, v) in json["mix"]?.objectMembers ?? [] { mix[k] = v.double ?? 0 }
    return Behaviour(
      kind: kind,
      perSecond: json["perSecond"]?.double ?? 1,
      afterMs: json["afterMs"]?.int ?? 1_000,
      afterGrace: json["afterGrace"]?.boolValue ?? false,
      callees: json["callees"]?.int ?? 1,
      mix: mix.isEmpty ? ["accept": 1] : mix,
      talkMs: json["talkMs"]?.int ?? 1_000,
      publishersPerSession: json["publishersPerSession"]?.int ?? 1,
      inflight: json["inflight"]?.int ?? 8)
  }
}

/// Finds shipped scenarios: `$RELAY_BOTS_DIR`, then `./bots`, then a `bots/`
/// folder in any parent of the executable (so `.build/debug/relay-bots` finds
/// the repository's scenarios from any working directory).
enum ScenarioLocator {
  static func searchDirectories() -> [URL] {
    var dirs: [URL] = []
    if let env = ProcessInfo.processInfo.environment["RELAY_BOTS_DIR"] {
      dirs.append(URL(fileURLWithPath: env))
    }
    dirs.append(URL(fileURLWithPath: FileManager.default.currentDirectoryPath).appendingPathComponent("bots"))
    var dir = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
      .deletingLastPathComponent()
    for _ in 0..<6 {
      dirs.append(dir.appendingPathComponent("bots"))
      dir = dir.deletingLastPathComponent()
    }
    return dirs
  }

  static func resolve(_ nameOrPath: String) throws -> URL {
    if nameOrPath.contains("/") || nameOrPath.hasSuffix(".json") {
      let url = URL(fileURLWithPath: nameOrPath)
      guard FileManager.default.fileExists(atPath: url.path) else {
        throw ScenarioError(description: "no scenario file at \(nameOrPath)")
      }
      return url
    }
    for dir in searchDirectories() {
      let url = dir.appendingPathComponent(nameOrPath + ".json")
      if FileManager.default.fileExists(atPath: url.path) { return url }
    }
    throw ScenarioError(
      description: "unknown scenario '\(nameOrPath)' (try `relay-bots list`, or set RELAY_BOTS_DIR)")
  }

  /// Shipped scenario names with their descriptions, from the first `bots/`
  /// folder that exists.
  static func shipped() -> [(name: String, description: String)] {
    for dir in searchDirectories() {
      guard let files = try? FileManager.default.contentsOfDirectory(atPath: dir.path) else { continue }
      return files.filter { $0.hasSuffix(".json") }.sorted().map { file in
        let name = String(file.dropLast(5))
        let text = (try? Data(contentsOf: dir.appendingPathComponent(file))).map { Array($0) } ?? []
        let desc = (try? JSONParser.parse(text))?["description"]?.stringValue ?? ""
        return (name, desc)
      }
    }
    return []
  }
}
