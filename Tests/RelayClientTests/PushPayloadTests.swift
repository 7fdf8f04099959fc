// The push pieces of RelayClient that need no relay: the persistent device id
// (file store, "relaunch" = a second client on the same file) and PushKit's
// payload dictionary decoded before any socket is up (protocol/ §9a).

import Foundation
import Testing

@testable import RelayClient

/// A fresh folder under the temporary directory, removed by the caller.
func scratchFolder() -> URL {
  FileManager.default.temporaryDirectory.appendingPathComponent("relay-device-\(UUID().uuidString)", isDirectory: true)
}

@Suite struct DeviceIDStoreTests {
  @Test("the id is generated once, written to the file, and the same for a relaunched client")
  func stableAcrossLaunches() throws {
    let folder = scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let file = folder.appendingPathComponent("nested/device-id")
    var options = RelayClientOptions()
    options.device = .persistent(file: file)
    let url = URL(string: "ws://127.0.0.1:9/v1/ws")!
    let first = RelayClient(url: url, auth: .dev(uid: "bob", name: "Bob"), options: options)
    let id = try #require(first.deviceID)
    #expect(DeviceID.isValid(id))
    #expect(try String(contentsOf: file, encoding: .utf8) == id)
    let relaunched = RelayClient(url: url, auth: .dev(uid: "bob", name: "Bob"), options: options)
    #expect(relaunched.deviceID == id)
    #expect(try RelayDeviceID.load(from: file) == id)
    // Another install (another container) is another device.
    #expect(try RelayDeviceID.load(from: folder.appendingPathComponent("other")) != id)
  }

  @Test("processes starting at once agree on one id")
  func concurrentFirstLaunch() throws {
    let folder = scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    let file = folder.appendingPathComponent("device-id")
    let ids = Locked<[String]>([])
    DispatchQueue.concurrentPerform(iterations: 16) { _ in
      if let id = try? RelayDeviceID.load(from: file) { ids.mutate { $0.append(id) } }
    }
    #expect(ids.value.count == 16)
    #expect(Set(ids.value).count == 1)
    #expect(try RelayDeviceID.load(from: file) == ids.value.first)
    let leftovers = try FileManager.default.contentsOfDirectory(atPath: folder.path)
    #expect(leftovers == ["device-id"], "no scratch files left behind")
  }

  @Test("a damaged file is replaced by a fresh id")
  func damaged() throws {
    let folder = scratchFolder()
    defer { try? FileManager.default.removeItem(at: folder) }
    try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
    let file = folder.appendingPathComponent("device-id")
    try Data("not a valid id!\n".utf8).write(to: file)
    let id = try RelayDeviceID.load(from: file)
    #expect(DeviceID.isValid(id))
    #expect(try RelayDeviceID.load(from: file) == id)
  }

  @Test("the app's own id, no id, and the XDG default location")
  func otherSources() {
    var options = RelayClientOptions()
    let url = URL(string: "ws://127.0.0.1:9/v1/ws")!
    options.device = .fixed("kitchen-tablet:2")
    #expect(RelayClient(url: url, auth: .dev(uid: "a", name: "A"), options: options).deviceID == "kitchen-tablet:2")
    options.device = .none
    #expect(RelayClient(url: url, auth: .dev(uid: "a", name: "A"), options: options).deviceID == nil)
    #expect(RelayDeviceID.defaultFile?.path.hasSuffix("/relay/device-id") == true)
  }
}

@Suite struct PushKitPayloadTests {
  /// PushKit's `dictionaryPayload` for the VoIP push of §9a, as Foundation types.
  static var voip: [AnyHashable: Any] {
    [
    "aps": [String: Any](),
    "relay": [
      "type": "call.incoming", "callId": "call-7", "sessionId": "sess-7",
      "from": ["uid": "alice", "name": "Alice", "avatar": "https://a.example/alice.png"],
      "to": ["bob", "carol"], "callType": "video",
      "metadata": ["topic": "standup", "n": 2] as [String: Any],
      "expiresAt": NSNumber(value: Int64(1_764_260_045_000)),
    ] as [String: Any],
    ]
  }

  @Test("the VoIP payload decodes to the Call the socket would give, without a client")
  func voipPayload() throws {
    guard case .incomingCall(let call) = RelayPush.decode(dictionaryPayload: Self.voip) else {
      Issue.record("not decoded")
      return
    }
    #expect(call.id == "call-7" && call.sessionID == "sess-7" && call.direction == .incoming)
    #expect(call.from == CallUser(uid: "alice", name: "Alice", avatar: "https://a.example/alice.png"))
    #expect(call.to == ["bob", "carol"] && call.callType == .video && call.status == .ringing)
    #expect(call.expiresAt == 1_764_260_045_000)
    #expect(call.metadata?["topic"] == .string("standup") && call.metadata?["n"]?.numberValue?.int64 == 2)
  }

  @Test("the missed-call alert's userInfo decodes to the ring's end")
  func missedCallAlert() {
    let alert: [AnyHashable: Any] = [
      "aps": ["alert": ["loc-key": "RELAY_MISSED_CALL", "loc-args": ["Alice"]]],
      "relay": ["type": "call.cancelled", "callId": "call-7", "reason": "unanswered"],
    ]
    #expect(RelayPush.decode(dictionaryPayload: alert) == .callCancelled(callID: "call-7", reason: .unanswered))
  }

  @Test("relay as JSON text is read too; foreign payloads are nil")
  func otherShapes() {
    let text: [AnyHashable: Any] = ["relay": #"{"type":"call.cancelled","callId":"k","reason":"cancelled"}"#]
    #expect(RelayPush.decode(dictionaryPayload: text) == .callCancelled(callID: "k", reason: .cancelled))
    #expect(RelayPush.decode(dictionaryPayload: ["aps": ["alert": "Sale!"]]) == nil)
    #expect(RelayPush.decode(dictionaryPayload: ["relay": 5]) == nil)
    #expect(RelayPush.decode(dictionaryPayload: ["relay": ["type": "call.incoming"]]) == nil)
  }
}

/// A value behind a lock, for collecting results from concurrent work.
final class Locked<Value>: @unchecked Sendable {
  private let lock = NSLock()
  private var stored: Value
  init(_ value: Value) { stored = value }
  var value: Value { lock.withLock { stored } }
  func mutate(_ change: (inout Value) -> Void) { lock.withLock { change(&stored) } }
}
