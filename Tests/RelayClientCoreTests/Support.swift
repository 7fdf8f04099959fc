// A harness for the pure client machine: time is a number the test advances,
// server messages are JSON text, effects are inspected as values.

@testable import RelayClientCore
import RelayProtocol

struct Harness {
  var machine: ClientMachine
  var now: Int64 = 1_000
  /// Every effect so far, in order.
  var log: [ClientEffect] = []

  init(auth: RelayAuth = .dev(uid: "bob", name: "Bob"), seed: UInt64 = 7, appPings: Bool = false) {
    var configuration = ClientConfiguration(auth: auth)
    configuration.sendsAppPings = appPings
    machine = ClientMachine(configuration: configuration, seed: seed)
  }

  @discardableResult
  mutating func run(_ step: (inout ClientMachine, Int64) -> [ClientEffect]) -> [ClientEffect] {
    let effects = step(&machine, now)
    log += effects
    return effects
  }

  @discardableResult
  mutating func server(_ json: String) -> [ClientEffect] {
    run { m, now in m.received(text: Array(json.utf8), nowMs: now) }
  }

  /// Advances time to `ms` later, firing `tick` at every deadline on the way.
  @discardableResult
  mutating func advance(_ ms: Int64) -> [ClientEffect] {
    let end = now + ms
    var effects: [ClientEffect] = []
    while let due = machine.nextDeadlineMs, due <= end {
      now = max(now, due)
      effects += run { m, now in m.tick(nowMs: now) }
    }
    now = end
    return effects
  }

  /// connect → open → welcome (resumed as given).
  @discardableResult
  mutating func connectAndWelcome(resumed: Bool = false, token: String = "rt-1") -> [ClientEffect] {
    run { m, now in m.connect(nowMs: now) }
    run { m, now in m.transportOpened(nowMs: now) }
    return server(welcome(resumed: resumed, token: token))
  }

  func welcome(resumed: Bool, token: String = "rt-1") -> String {
    #"{"type":"welcome","re":"hello","connectionId":"c1","resumeToken":"\#(token)","user":{"uid":"bob","name":"Bob","role":"participant"},"heartbeat":{"interval":1000,"timeout":3000},"resumed":\#(resumed),"server":{"version":"1"}}"#
  }

  /// A `session.joined` snapshot of `session` at `seq` with these members and hands.
  static func joined(_ session: String, seq: Int, members: [String], hands: [String] = [], recovered: Bool? = nil)
    -> String
  {
    let people = members.map {
      #"{"uid":"\#($0)","name":"\#($0)","role":"participant","joinedAt":1,"status":"connected"}"#
    }
    let queue = hands.enumerated().map { #"{"uid":"\#($1)","name":"\#($1)","raisedAt":\#($0 + 10)}"# }
    let rec = recovered.map { #","recovered":\#($0)"# } ?? ""
    return #"{"type":"session.joined","session":"\#(session)","seq":\#(seq),"self":\#(people.last ?? "{}"),"participants":[\#(people.joined(separator: ","))],"hands":[\#(queue.joined(separator: ","))]\#(rec)}"#
  }

  static func message(_ session: String, seq: Int, from: String = "alice", n: Int = 0) -> String {
    #"{"type":"message","session":"\#(session)","seq":\#(seq),"ts":5,"from":"\#(from)","data":{"n":\#(n)}}"#
  }

  static func hand(_ type: String, _ session: String, seq: Int, uid: String) -> String {
    #"{"type":"\#(type)","session":"\#(session)","seq":\#(seq),"ts":5,"uid":"\#(uid)","name":"\#(uid)","raisedAt":\#(seq),"by":"\#(uid)","reason":"self"}"#
  }
}

extension ClientEffect {
  /// The JSON object of a `.send` effect.
  var sent: JSONObject? {
    guard case .send(let bytes) = self else { return nil }
    return try? JSONParser.parse(bytes).objectValue
  }

  var event: ClientEvent? {
    guard case .event(let e) = self else { return nil }
    return e
  }
}

extension Array where Element == ClientEffect {
  var sentTypes: [String] { compactMap { $0.sent?["type"]?.stringValue } }
  var events: [ClientEvent] { compactMap(\.event) }
  var opens: Int { filter { $0 == .openTransport }.count }
}
