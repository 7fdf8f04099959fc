// An app relaunched within grace keeps its place (`RelayClientOptions.persistence`):
// this test binary is run twice as a child process against the real relay. The first
// run joins, raises a hand and exits without leaving (the kernel closes its socket
// without a close frame, as when an app is killed); the second run finds the file,
// resumes (`welcome.resumed`), keeps the hand's place, gets the message and the
// ringing call of the time it was gone (§4 step 2, §9), then disconnects.

import Foundation
import Testing

@testable import RelayClient

#if canImport(Glibc)
  import Glibc
#endif

/// What the child runs of the relaunch, from its environment (unset: nothing).
enum RelaunchChild {
  static let stepKey = "RELAY_RELAUNCH_STEP"

  static func run(step: String, env: [String: String]) async throws {
    guard let url = env["RELAY_RELAUNCH_URL"].flatMap(URL.init(string:)),
      let file = env["RELAY_RELAUNCH_FILE"], let out = env["RELAY_RELAUNCH_OUT"]
    else { throw RelayTestError("relaunch: environment incomplete") }
    var options = RelayClientOptions()
    options.persistence = .file(URL(fileURLWithPath: file))
    options.device = .none
    let client = RelayClient(url: url, auth: dev("bob"), options: options)
    let recorder = Recorder()
    client.addSessionStatusListener(id: "r", recorder)
    client.addParticipantEventListener(id: "r", recorder)
    client.addCallListener(id: "r", recorder)
    try await client.connect()
    if step == "first" {
      try await client.joinSession(sessionID: "room")
      try await client.raiseHand(sessionID: "room")
      await recorder.wait(for: "handRaised room bob")
      // Killed, as far as the relay can tell: no leave, no close frame.
      exit(0)
    }
    await recorder.wait(for: "incoming alice")
    await recorder.wait(for: "message room alice 1")
    let report = [
      "resumed=\(client.state.resumed)",
      "hands=\(client.state.raisedHands(in: "room").map(\.uid).joined(separator: ","))",
      "events=\(recorder.all.filter { !$0.hasPrefix("connection") }.joined(separator: ";"))",
    ].joined(separator: "\n")
    try report.write(toFile: out, atomically: true, encoding: .utf8)
    client.disconnect()
    await waitUntil { !FileManager.default.fileExists(atPath: file) }
  }

  static func waitUntil(_ condition: @escaping @Sendable () -> Bool) async {
    for _ in 0..<200 where !condition() { try? await Task.sleep(nanoseconds: 25_000_000) }
  }
}

@Suite(.serialized) struct RelaunchLiveTests {
  @Test("child half of the relaunch test (runs only when started by relaunchResumes)")
  func relaunchChild() async throws {
    let env = ProcessInfo.processInfo.environment
    guard let step = env[RelaunchChild.stepKey] else { return }
    try await RelaunchChild.run(step: step, env: env)
  }

  @Test("relaunched within grace: resumed, hand in place, missed message and ringing call delivered")
  func relaunchResumes() async throws {
    let relay = try RelayProcess(["--grace", "30000", "--ring-timeout", "30000"])
    let dir = FileManager.default.temporaryDirectory.appendingPathComponent("relaunch-\(getpid())-\(relay.port)")
    try FileManager.default.createDirectory(at: dir, withIntermediateDirectories: true)
    defer { try? FileManager.default.removeItem(at: dir) }
    let (alice, ra) = makeClient(relay, dev("alice"))
    try await alice.connect()
    try await alice.joinSession(sessionID: "room")

    try runChild("first", relay: relay, dir: dir)
    await ra.wait(for: "participantLost room bob")
    #expect(alice.state.raisedHands(in: "room").map(\.uid) == ["bob"])
    try await alice.raiseHand(sessionID: "room")
    try await alice.sendMessage(.object(JSONObject([("n", .number(JSONNumber(1)))])), sessionID: "room")
    _ = try await alice.initiateCall(to: ["bob"], callType: .audio)

    try runChild("second", relay: relay, dir: dir)
    let report = try String(contentsOf: dir.appendingPathComponent("out"), encoding: .utf8)
    #expect(report.contains("resumed=true"), "\(report)")
    #expect(report.contains("hands=bob,alice"), "the hand kept its place: \(report)")
    // Replayed after the stored seq: exactly what happened while it was gone, once.
    let events = report.split(separator: "\n").first { $0.hasPrefix("events=") } ?? ""
    #expect(events.components(separatedBy: "message room alice 1").count == 2, "\(events)")
    #expect(events.contains("incoming alice"))
    #expect(!events.contains("sessionJoined"), "resumed, not joined afresh: \(events)")
    await ra.wait(for: "participantRestored room bob")
    await ra.wait(for: "participantLeft room bob left")  // the second run's disconnect()
    #expect(!ra.all.contains("participantTimedOut room bob"))
    #expect(!FileManager.default.fileExists(atPath: dir.appendingPathComponent("place.json").path))
    alice.disconnect()
  }

  @Test("suspend(): lost, not left; a new client on the same file resumes; disconnect() removes it")
  func suspendThenResume() async throws {
    let relay = try RelayProcess(["--grace", "30000"])
    let file = FileManager.default.temporaryDirectory.appendingPathComponent("suspend-\(getpid())-\(relay.port).json")
    defer { try? FileManager.default.removeItem(at: file) }
    var options = RelayClientOptions()
    options.persistence = .file(file)
    options.device = .none
    let (alice, ra) = makeClient(relay, dev("alice"))
    try await alice.connect()
    try await alice.joinSession(sessionID: "room")
    let bob = RelayClient(url: relay.url, auth: dev("bob"), options: options)
    try await bob.connect()
    #expect(!bob.state.resumed)
    try await bob.joinSession(sessionID: "room")
    try await bob.raiseHand(sessionID: "room")
    try await alice.raiseHand(sessionID: "room")
    await ra.wait(10, "two hands") { _ in alice.state.raisedHands(in: "room").count == 2 }
    bob.suspend()
    await ra.wait(for: "participantLost room bob")
    #expect(FileManager.default.fileExists(atPath: file.path))

    let again = RelayClient(url: relay.url, auth: dev("bob"), options: options)
    try await again.connect()
    #expect(again.state.resumed)
    await ra.wait(for: "participantRestored room bob")
    // The replay (events after the stored seq) follows `welcome`: wait for it.
    await ra.wait(10, "bob's view replayed") { _ in
      again.state.participants(in: "room").first { $0.uid == "bob" }?.status == .connected
        && again.state.raisedHands(in: "room").count == 2
    }
    #expect(again.state.raisedHands(in: "room").map(\.uid) == ["bob", "alice"])
    #expect(!ra.all.contains("participantLeft room bob left"))
    again.disconnect()
    await ra.wait(for: "participantLeft room bob left")
    await RelaunchChild.waitUntil { !FileManager.default.fileExists(atPath: file.path) }
    #expect(!FileManager.default.fileExists(atPath: file.path))
    alice.disconnect()
  }

  /// Runs this test binary's child test with `step`; fails unless it exits 0.
  private func runChild(_ step: String, relay: RelayProcess, dir: URL) throws {
    let child = Process()
    child.executableURL = URL(fileURLWithPath: "/proc/self/exe").resolvingSymlinksInPath()
    child.arguments = [
      "--testing-library", "swift-testing", "--filter", "RelayClientTests.RelaunchLiveTests/relaunchChild()",
    ]
    var env = ProcessInfo.processInfo.environment
    env[RelaunchChild.stepKey] = step
    env["RELAY_RELAUNCH_URL"] = relay.url.absoluteString
    env["RELAY_RELAUNCH_FILE"] = dir.appendingPathComponent("place.json").path
    env["RELAY_RELAUNCH_OUT"] = dir.appendingPathComponent("out").path
    child.environment = env
    child.standardOutput = FileHandle.nullDevice
    let log = dir.appendingPathComponent("\(step).log")
    FileManager.default.createFile(atPath: log.path, contents: nil)
    child.standardError = try FileHandle(forWritingTo: log)
    try child.run()
    // Bounded: a child that hangs is killed (by its PID) and the test fails.
    let watchdog = DispatchWorkItem { kill(child.processIdentifier, SIGKILL) }
    DispatchQueue.global().asyncAfter(deadline: .now() + 60, execute: watchdog)
    child.waitUntilExit()
    watchdog.cancel()
    guard child.terminationStatus == 0 else {
      let output = (try? String(contentsOf: log, encoding: .utf8)) ?? ""
      throw RelayTestError("relaunch child \(step) exited \(child.terminationStatus):\n\(output)")
    }
  }
}
