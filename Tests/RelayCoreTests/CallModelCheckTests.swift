// Exhaustive model check of §9 ringing: 1 caller (alice, c1) × 2 callees (bob: c2, c3;
// carol: c4, c5). From the initial ring, EVERY sequence of the actions accept (per
// device), reject (per device), cancel, ring timeout, caller timed out (§5) and end
// (per connection) is explored depth-first until nothing can change any more. A small
// reference model predicts each action's outcome; after every step the core must agree:
// exactly one terminal outcome per callee, refused (racing) commands answered with the
// predicted code and changing nothing, and every connection's messages consistent.
// A refused action changes nothing (checked), so its subtree equals its parent's and
// is not explored again: the search is exhaustive over distinct states.
import RelayProtocol
import Testing

@testable import RelayCore

enum CallAct: Hashable, CustomStringConvertible {
  case accept(UInt64), reject(UInt64), end(UInt64)
  case cancel, ringTimeout, callerTimedOut

  static let all: [CallAct] =
    [2, 3, 4, 5].map { .accept($0) } + [2, 3, 4, 5].map { .reject($0) } + [.cancel, .ringTimeout, .callerTimedOut]
    + [1, 2, 3, 4, 5].map { .end($0) }

  var description: String {
    switch self {
    case .accept(let c): return "accept@c\(c)"
    case .reject(let c): return "reject@c\(c)"
    case .end(let c): return "end@c\(c)"
    case .cancel: return "cancel"
    case .ringTimeout: return "ringTimeout"
    case .callerTimedOut: return "callerTimedOut"
    }
  }
}

func owner(_ c: UInt64) -> String { c == 1 ? "alice" : c <= 3 ? "bob" : "carol" }
func devicesOf(_ uid: String) -> [UInt64] { uid == "bob" ? [2, 3] : [4, 5] }

/// The reference model: what the contract says each action does.
struct CallModel {
  enum Prediction: Equatable { case disabled, refused(String), applied }

  var state: [String: CalleeState] = ["bob": .ringing, "carol": .ringing]
  /// The device that accepted or rejected, per callee.
  var device: [String: UInt64] = [:]
  /// `call.cancelled.reason` of callees whose ring was stopped for them.
  var reason: [String: String] = [:]
  var callerGone = false
  var ringFired = false
  var ended = false
  var endReason = ""
  var callerSawEnd = false
  var acceptedAtMs: Int64?

  var anyAccepted: Bool { state.values.contains(.accepted) || state.values.contains(.ended) }

  func predict(_ act: CallAct) -> Prediction {
    switch act {
    case .accept(let c), .reject(let c):
      return state[owner(c)] == .ringing ? .applied : .refused("conflict")
    case .cancel:
      if callerGone { return .disabled }
      return state.values.contains(.ringing) ? .applied : .refused("conflict")
    case .ringTimeout: return ringFired ? .disabled : .applied
    case .callerTimedOut: return callerGone ? .disabled : .applied
    case .end(let c):
      if c == 1 && callerGone { return .disabled }
      let uid = owner(c)
      let inCall = uid == "alice" || state[uid] == .accepted
      return !ended && anyAccepted && inCall ? .applied : .refused("conflict")
    }
  }

  mutating func stopRinging(_ to: CalleeState, _ why: String) {
    for uid in ["bob", "carol"] where state[uid] == .ringing {
      state[uid] = to
      reason[uid] = why
    }
  }

  mutating func apply(_ act: CallAct, nowMs: Int64) {
    switch act {
    case .accept(let c):
      state[owner(c)] = .accepted
      device[owner(c)] = c
      acceptedAtMs = acceptedAtMs ?? nowMs
    case .reject(let c):
      state[owner(c)] = .rejected
      device[owner(c)] = c
    case .cancel: stopRinging(.cancelled, "cancelled")
    case .ringTimeout:
      ringFired = true
      stopRinging(.unanswered, "unanswered")
    case .callerTimedOut:
      callerGone = true
      if anyAccepted && !ended { finish("timed_out", callerSees: false) }
      stopRinging(.cancelled, "caller_timed_out")
    case .end:
      finish("ended", callerSees: true)
      stopRinging(.cancelled, "cancelled")
    }
  }

  mutating func finish(_ why: String, callerSees: Bool) {
    ended = true
    endReason = why
    callerSawEnd = callerSees
    for uid in ["bob", "carol"] where state[uid] == .accepted { state[uid] = .ended }
  }
}

/// One run of the core under a sequence of actions, with every call message each
/// connection received.
final class CallWorld {
  let t = CallHarness()
  let callId: String
  var model = CallModel()
  var log: [UInt64: [JSONValue]] = [:]

  init() {
    t.h.connect(5, uid: "carol")
    let (id, _, lines) = t.call(["bob", "carol"])
    callId = id
    record(lines)
  }

  /// Applies `act` to the core; returns the rendered effects.
  func perform(_ act: CallAct) -> [String] {
    switch act {
    case .accept(let c): return t.send(c, "call.accept", callId)
    case .reject(let c): return t.send(c, "call.reject", callId)
    case .end(let c): return t.send(c, "call.end", callId)
    case .cancel: return t.send(1, "call.cancel", callId)
    case .ringTimeout:
      t.h.advance(45_000)
      return t.h.out()
    case .callerTimedOut:
      // §5: the caller's connection is lost, then its grace runs out.
      t.h.core.closed(ConnectionID(1), clean: false, at: t.h.now)
      t.h.core.endCallsOfTimedOutUser(uid: "alice", at: t.h.now)
      return t.h.out()
    }
  }

  func step(_ act: CallAct) -> [String] {
    let lines = perform(act)
    if model.predict(act) == .applied { model.apply(act, nowMs: t.h.now.monoMs) }
    record(lines)
    return lines
  }

  func record(_ lines: [String]) {
    for line in lines {
      guard let arrow = line.firstRange(of: " <- ") else { continue }
      guard let json = try? JSONParser.parse(String(line[arrow.upperBound...])),
        let type = json["type"]?.stringValue, type.hasPrefix("call.")
      else { continue }
      for r in line[..<arrow.lowerBound].split(separator: ",") {
        log[UInt64(r.dropFirst())!, default: []].append(json)
      }
    }
  }

  /// Internal state of the call, to prove a refused action changed nothing.
  func snapshot() -> String {
    guard let call = t.h.core.calls.calls[callId] else { return "gone" }
    let callees = call.callees.map {
      "\($0.uid)=\($0.state.rawValue) dev=\($0.devices) done=\($0.done) by=\(String(describing: $0.acceptedBy))"
    }
    return "\(call.stateName) \(callees) ended=\(String(describing: call.endedBy)) live=\(t.h.core.calls.live.mapValues { $0.map(\.id) })"
  }
}

func types(_ messages: [JSONValue]) -> [String] { messages.compactMap { $0["type"]?.stringValue } }

@Suite struct CallModelCheckTests {
  @Test func everyInterleavingKeepsOneOutcomePerCallee() {
    var steps = 0
    var states = 0
    var refusals = 0
    var maxDepth = 0
    var stack: [[CallAct]] = [[]]
    while let prefix = stack.popLast() {
      states += 1
      maxDepth = max(maxDepth, prefix.count)
      let base = CallWorld()
      for act in prefix { _ = base.step(act) }
      for act in CallAct.all {
        let prediction = base.model.predict(act)
        guard prediction != .disabled else { continue }
        steps += 1
        let path = (prefix + [act]).map(\.description).joined(separator: " ")
        if case .refused(let expected) = prediction {
          // Refusals run on the base world itself: they must change nothing, which
          // is exactly what is checked, so the base stays valid for its siblings.
          refusals += 1
          let before = base.snapshot()
          let lines = base.step(act)
          #expect(code(lines) == expected, "\(path): \(lines)")
          #expect(base.snapshot() == before, "\(path) changed state")
          check(base, path)
        } else {
          let world = CallWorld()
          for previous in prefix { _ = world.step(previous) }
          let lines = world.step(act)
          #expect(!lines.contains { $0.contains(#""type":"error""#) }, "\(path): \(lines)")
          check(world, path)
          stack.append(prefix + [act])
        }
      }
    }
    print("call model check: \(states) states, \(steps) steps checked (\(refusals) refusals), max depth \(maxDepth)")
    #expect(states > 1_000)
    #expect(refusals > 0)
    #expect(maxDepth >= 5)
  }

  /// The invariants every reachable state must satisfy.
  func check(_ w: CallWorld, _ path: String) {
    let info = w.t.h.core.callInfo(callId: w.callId, uid: "bob").flatMap { try? JSONParser.parse($0) }
    for uid in ["bob", "carol"] {
      let state = w.model.state[uid]!
      // One outcome per callee: the core's state is the model's, whose transitions
      // leave `ringing` once and then only go accepted → ended.
      #expect(info?["callees"]?[uid]?.stringValue == state.rawValue, "\(path): \(uid)")
      checkDevices(w, uid: uid, state: state, path)
    }
    checkCaller(w, path)
  }

  func checkDevices(_ w: CallWorld, uid: String, state: CalleeState, _ path: String) {
    for c in devicesOf(uid) {
      let got = types(w.log[c] ?? [])
      // Exactly one call.incoming, first; then at most one terminal; call.ended only
      // after this device's own call.accepted.
      #expect(got.first == "call.incoming" && got.filter { $0 == "call.incoming" }.count == 1, "\(path) c\(c): \(got)")
      let rest = Array(got.dropFirst())
      let expected: [String]
      let mine = w.model.device[uid] == c
      switch state {
      case .ringing: expected = []
      case .accepted: expected = mine ? ["call.accepted"] : ["call.cancelled"]
      case .ended: expected = mine ? ["call.accepted", "call.ended"] : ["call.cancelled"]
      case .rejected: expected = mine ? [] : ["call.cancelled"]
      case .cancelled, .unanswered: expected = ["call.cancelled"]
      case .busy: expected = []
      }
      #expect(rest == expected, "\(path) c\(c): \(got)")
      let reasons = (w.log[c] ?? []).compactMap { $0["type"]?.stringValue == "call.cancelled" ? $0["reason"]?.stringValue : nil }
      let expectedReason: String? =
        switch state {
        case .accepted, .ended: mine ? nil : "answered_elsewhere"
        case .rejected: mine ? nil : "rejected_elsewhere"
        case .cancelled, .unanswered: w.model.reason[uid]
        default: nil
        }
      #expect(reasons == (expectedReason.map { [$0] } ?? []), "\(path) c\(c): \(reasons)")
      if state == .ended && mine {
        let end = w.log[c]!.last!
        #expect(end["reason"]?.stringValue == w.model.endReason, "\(path) c\(c)")
      }
    }
  }

  func checkCaller(_ w: CallWorld, _ path: String) {
    let got = w.log[1] ?? []
    #expect(types(Array(got.prefix(2))) == ["call.ringing", "call.ringing"], "\(path): \(types(got))")
    for uid in ["bob", "carol"] {
      let about = got.dropFirst(2).filter { $0["uid"]?.stringValue == uid }.compactMap { $0["type"]?.stringValue }
      let expected: [String] =
        switch w.model.state[uid]! {
        case .accepted, .ended: ["call.accepted"]
        case .rejected: ["call.rejected"]
        case .unanswered: ["call.unanswered"]
        default: []
        }
      #expect(about == expected, "\(path): caller about \(uid): \(about)")
    }
    let ends = got.filter { $0["type"]?.stringValue == "call.ended" }
    #expect(ends.count == (w.model.ended && w.model.callerSawEnd ? 1 : 0), "\(path): caller ends \(ends.count)")
    #expect(!types(got).contains("call.cancelled") && !types(got).contains("call.incoming"), "\(path)")
  }
}
