// A SwiftUI room screen on RelayClient (iOS 17+ / macOS 14+). Not built by the
// package: copy into an app target.

import RelayClient
import SwiftUI

/// Everything the room screen shows comes from `client.state` (an `@Observable`
/// object updated on the main queue); the view model only adds what the relay does
/// not keep, the message log, and turns buttons into commands.
@MainActor
@Observable
final class RoomViewModel {
  let client: RelayClient
  let sessionID: String
  private(set) var messages: [String] = []
  private(set) var lastError: String?

  init(url: URL, token: String, sessionID: String) {
    // Callbacks arrive on the main queue by default on Apple platforms. The place is
    // kept in Application Support, so a relaunch (a VoIP push waking the app) within
    // grace resumes the room and a ringing call instead of joining afresh (§9).
    var options = RelayClientOptions()
    options.persistence = .file()
    client = RelayClient(url: url, auth: .token(token), options: options)
    self.sessionID = sessionID
    client.addParticipantEventListener(id: "room", MessageLog(model: self))
  }

  var connection: ConnectionState { client.state.connectionState }
  var participants: [Participant] { client.state.participants(in: sessionID) }
  /// Server order: the first raised is first; a re-raise went to the back.
  var hands: [RaisedHand] { client.state.raisedHands(in: sessionID) }
  var myHandIsUp: Bool { hands.contains { $0.uid == client.state.user?.uid } }

  func start() async {
    do {
      try await client.connect()
      // A resumed relaunch is already in the room (restored, then replayed).
      if client.state.sessions[sessionID] == nil { try await client.joinSession(sessionID: sessionID) }
    } catch {
      lastError = error.description
    }
  }

  func toggleHand() async {
    do {
      if myHandIsUp {
        try await client.lowerHand(sessionID: sessionID)
      } else {
        try await client.raiseHand(sessionID: sessionID)
      }
    } catch where error.code == .rateLimited {
      lastError = "Slow down a little."
    } catch {
      lastError = error.description
    }
  }

  func send(_ text: String) {
    client.sendMessage(.object(JSONObject([("text", .string(text))])), sessionID: sessionID)
  }

  /// Call from `scenePhase` changes: the relay then keeps this user for the longer
  /// background grace if iOS suspends the socket.
  func scenePhaseChanged(_ phase: ScenePhase) {
    client.setBackground(phase == .background)
  }

  fileprivate func append(_ line: String) { messages.append(line) }
}

/// Listener protocols are not actor-isolated; callbacks run on the main queue
/// (the client's default callback queue), so hopping onto the main actor is safe.
private final class MessageLog: ParticipantEventListener {
  weak var model: RoomViewModel?
  init(model: RoomViewModel) { self.model = model }

  func onMessageReceived(_ message: RelayMessage, sessionID: String) {
    let text = message.data["text"]?.stringValue ?? "…"
    MainActor.assumeIsolated { model?.append("\(message.from): \(text)") }
  }
}

struct RoomView: View {
  @State var model: RoomViewModel
  @Environment(\.scenePhase) private var scenePhase

  var body: some View {
    List {
      if model.connection == .reconnecting {
        Label("Reconnecting…", systemImage: "wifi.exclamationmark")
      }
      Section("Raised hands") {
        ForEach(model.hands) { hand in Text(hand.name) }
      }
      Section("Participants") {
        ForEach(model.participants) { p in
          HStack {
            Text(p.name)
            Spacer()
            if p.status == .lost { Image(systemName: "antenna.radiowaves.left.and.right.slash") }
          }
        }
      }
      Section("Messages") {
        ForEach(Array(model.messages.enumerated()), id: \.offset) { Text($0.element) }
      }
    }
    .toolbar {
      Button(model.myHandIsUp ? "Lower hand" : "Raise hand") { Task { await model.toggleHand() } }
    }
    .task { await model.start() }
    .onChange(of: scenePhase) { _, phase in model.scenePhaseChanged(phase) }
  }
}
