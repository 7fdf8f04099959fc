// Live-test support: a real `relay` process on a free loopback port, and a listener
// that records every callback and lets a test await a condition (bounded).

import Foundation
import RelayClient
import Testing

#if canImport(Glibc)
  import Glibc
#endif

/// A `relay serve` child process; stopped by PID.
final class RelayProcess: @unchecked Sendable {
  let port: Int
  let process = Process()

  static var binary: String {
    if let env = ProcessInfo.processInfo.environment["RELAY_BIN"], !env.isEmpty { return env }
    let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
      .deletingLastPathComponent()
    return root.appendingPathComponent(".build/debug/relay").path
  }

  /// `tls`: the relay was given `--tls-cert`: URLs are `wss://` and readiness is the
  /// port accepting connections (the plain `/healthz` probe cannot speak TLS).
  let tls: Bool

  init(_ args: [String], port: Int? = nil, tls: Bool = false) throws {
    self.tls = tls
    self.port = port ?? Self.freePort()
    process.executableURL = URL(fileURLWithPath: Self.binary)
    process.arguments = ["serve", "--listen", "127.0.0.1:\(self.port)", "--log-level", "warning"] + args
    var env = ProcessInfo.processInfo.environment
    env["RELAY_SECRET"] = nil
    env["RELAY_ADMIN_KEY"] = nil
    process.environment = env
    process.standardOutput = FileHandle.nullDevice
    process.standardError = FileHandle.nullDevice
    try process.run()
    try waitHealthy()
  }

  var url: URL { URL(string: "\(tls ? "wss" : "ws")://localhost:\(port)/v1/ws")! }

  /// Polls `/healthz` until it answers 200 (a port that is not open yet has no event
  /// to await), for at most 20 s.
  private func waitHealthy() throws {
    let deadline = Date().addingTimeInterval(20)
    while Date() < deadline {
      guard process.isRunning else { throw RelayTestError("relay exited early") }
      if tls ? Self.accepts(port: port) : Self.httpGet(port: port, path: "/healthz")?.hasPrefix("HTTP/1.1 200") == true {
        return
      }
      usleep(20_000)
    }
    stop()
    throw RelayTestError("relay did not become healthy")
  }

  func stop() {
    guard process.isRunning else { return }
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
  }

  deinit { stop() }

  /// A port nothing listens on: bind 127.0.0.1:0, read it, close.
  static func accepts(port: Int) -> Bool {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = in_port_t(UInt16(port).bigEndian)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    return withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
    } == 0
  }

  static func freePort() -> Int {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = 0
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafeMutablePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return Int(UInt16(bigEndian: addr.sin_port))
  }

  /// One blocking HTTP/1.1 GET over loopback; the raw response, or nil.
  static func httpGet(port: Int, path: String) -> String? {
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    addr.sin_port = UInt16(port).bigEndian
    let ok = withUnsafePointer(to: &addr) {
      $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
        connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
      }
    }
    guard ok == 0 else { return nil }
    let request = Array("GET \(path) HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".utf8)
    _ = request.withUnsafeBytes { send(fd, $0.baseAddress, $0.count, 0) }
    var buffer = [UInt8](repeating: 0, count: 4096)
    let n = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
    return n > 0 ? String(decoding: buffer[..<n], as: UTF8.self) : nil
  }

  /// A token from `relay token` (§10).
  static func token(secret: String, sub: String, name: String, role: String = "participant") throws -> String {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: binary)
    p.arguments = ["token", "--secret", secret, "--sub", sub, "--name", name, "--sessions", "*", "--role", role]
    let pipe = Pipe()
    p.standardOutput = pipe
    try p.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    p.waitUntilExit()
    return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
  }
}

struct RelayTestError: Error, CustomStringConvertible {
  var description: String
  init(_ d: String) { description = d }
}

/// Records every callback as a line ("handRaised room bob") and wakes waiters.
final class Recorder: SessionStatusListener, ParticipantEventListener, CallListener, @unchecked Sendable {
  private let condition = NSCondition()
  private var lines: [String] = []
  private(set) var calls: [Call] = []
  private(set) var messageSeqs: [Int64] = []

  func record(_ line: String, call: Call? = nil, seq: Int64? = nil) {
    condition.lock()
    lines.append(line)
    if let call { calls.append(call) }
    if let seq { messageSeqs.append(seq) }
    condition.broadcast()
    condition.unlock()
  }

  var all: [String] { condition.withLock { lines } }
  var seqs: [Int64] { condition.withLock { messageSeqs } }
  func lastCall() -> Call? { condition.withLock { calls.last } }

  /// Waits (at most `seconds`) until `predicate` holds over the lines recorded so far;
  /// rechecked on every callback, and every 50 ms for conditions on `state`.
  @discardableResult
  func wait(
    _ seconds: Double = 10, _ what: String = "", sourceLocation: SourceLocation = #_sourceLocation,
    until predicate: @escaping @Sendable ([String]) -> Bool
  ) async -> Bool {
    let ok = await withCheckedContinuation { (c: CheckedContinuation<Bool, Never>) in
      DispatchQueue.global().async {
        let deadline = Date().addingTimeInterval(seconds)
        self.condition.lock()
        while !predicate(self.lines) && Date() < deadline {
          _ = self.condition.wait(until: min(deadline, Date().addingTimeInterval(0.05)))
        }
        let ok = predicate(self.lines)
        self.condition.unlock()
        c.resume(returning: ok)
      }
    }
    if !ok { Issue.record("timed out waiting for \(what); got \(all)", sourceLocation: sourceLocation) }
    return ok
  }

  /// Waits until `line` was recorded.
  @discardableResult
  func wait(for line: String, _ seconds: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) async
    -> Bool
  {
    await wait(seconds, line, sourceLocation: sourceLocation) { $0.contains(line) }
  }

  func onSessionJoined(_ session: SessionState) { record("sessionJoined \(session.id)") }
  func onSessionLeft(sessionID: String, reason: String) { record("sessionLeft \(sessionID) \(reason)") }
  func onConnectionLost() { record("connectionLost") }
  func onConnectionRestored() { record("connectionRestored") }
  func onConnectionClosed(code: UInt16, reason: String) { record("connectionClosed \(code)") }
  func onSessionTimedOut(sessionID: String) { record("sessionTimedOut \(sessionID)") }
  func onSessionIdleWarning(sessionID: String, timeoutAt: Int64) { record("idleWarning \(sessionID)") }
  func onParticipantJoined(_ p: Participant, sessionID: String) { record("participantJoined \(sessionID) \(p.uid)") }
  func onParticipantLeft(uid: String, reason: String, sessionID: String) {
    record("participantLeft \(sessionID) \(uid) \(reason)")
  }
  func onParticipantHandRaised(_ hand: RaisedHand, sessionID: String) { record("handRaised \(sessionID) \(hand.uid)") }
  func onParticipantHandLowered(uid: String, by: String, reason: String, sessionID: String) {
    record("handLowered \(sessionID) \(uid) \(reason)")
  }
  func onParticipantConnectionLost(uid: String, sessionID: String) { record("participantLost \(sessionID) \(uid)") }
  func onParticipantConnectionRestored(uid: String, sessionID: String) {
    record("participantRestored \(sessionID) \(uid)")
  }
  func onParticipantTimedOut(uid: String, sessionID: String) { record("participantTimedOut \(sessionID) \(uid)") }
  func onMessageReceived(_ m: RelayMessage, sessionID: String) {
    record("message \(sessionID) \(m.from) \(m.data["n"]?.numberValue?.text ?? "")", seq: m.seq)
  }
  func onIncomingCallReceived(_ call: Call) { record("incoming \(call.from.uid)", call: call) }
  func onOutgoingCallAccepted(_ call: Call, by uid: String) { record("accepted \(uid)", call: call) }
  func onOutgoingCallRejected(_ call: Call, by uid: String, reason: String) {
    record("rejected \(uid) \(reason)", call: call)
  }
  func onIncomingCallCancelled(_ call: Call, reason: CallCancelReason) {
    record("cancelled \(reason.rawValue)", call: call)
  }
  func onOutgoingCallUnanswered(_ call: Call, uid: String) { record("unanswered \(uid)", call: call) }
  func onCallBusy(_ call: Call, uid: String) { record("busy \(uid)", call: call) }
  func onCallEnded(_ call: Call, by uid: String, reason: String, durationMs: Int64) {
    record("ended \(uid) \(reason)", call: call)
  }
}

/// A connected client with a recorder on all three listener kinds.
func makeClient(_ relay: RelayProcess, _ auth: RelayAuth) -> (RelayClient, Recorder) {
  let client = RelayClient(url: relay.url, auth: auth)
  let recorder = Recorder()
  client.addSessionStatusListener(id: "r", recorder)
  client.addParticipantEventListener(id: "r", recorder)
  client.addCallListener(id: "r", recorder)
  return (client, recorder)
}

func dev(_ uid: String, host: Bool = false) -> RelayAuth {
  .dev(uid: uid, name: uid.capitalized, role: host ? "host" : nil)
}
