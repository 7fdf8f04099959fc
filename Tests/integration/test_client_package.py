"""RelayClient as an app adopts it: a versioned SwiftPM dependency.

A clone of this repository (with the working tree as it is now committed on top)
is tagged 0.2.0 (the version of both clients); a new package depends on it with
`.package(url: "file://…", from: "0.2.0")`, uses only the public API of the
`RelayClient` product, builds, and runs against a live relay. SwiftPM refuses a
versioned dependency whose product graph has `unsafeFlags`, so this also guards
Package.swift. Nothing is skipped: swift and git are what the suite is built with.

The build is a fresh one of the client's module graph (and a resolution of the
package's dependencies from the same mirrors as the main build); its scratch and
cache directories live under pytest's temporary directory.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT

TAG = "0.2.0"
BUILD_TIMEOUT_S = 900  # a cold build of the client graph on a shared 2-core machine

CONSUMER_MANIFEST = """\
// swift-tools-version:6.0
import PackageDescription

let package = Package(
  name: "RelayConsumer",
  platforms: [.iOS(.v17), .macOS(.v14)],
  dependencies: [
    .package(url: "{url}", from: "{tag}"),
  ],
  targets: [
    .executableTarget(
      name: "RelayConsumer",
      dependencies: [.product(name: "RelayClient", package: "relay")]),
  ]
)
"""

# Public API only (no @testable): the listener protocols, the AsyncSequence of
# events, typed async commands, the call flow an iOS app runs after CallKit's
# answer (acceptCall), and push registration and decoding.
CONSUMER_MAIN = """\
import Foundation
import RelayClient

guard CommandLine.arguments.count == 2, let url = URL(string: CommandLine.arguments[1]) else {
  print("usage: RelayConsumer ws://host:port/v1/ws")
  exit(2)
}
DispatchQueue.global().asyncAfter(deadline: .now() + 30) {
  print("timeout")
  exit(3)
}

final class Ringer: CallListener, @unchecked Sendable {
  let client: RelayClient
  init(client: RelayClient) { self.client = client }
  func onIncomingCallReceived(_ call: Call) {
    print("listener incoming \\(call.from.uid) \\(call.callType.rawValue)")
    client.acceptCall(callID: call.id)  // what a CallKit answer action does
  }
}

let alice = RelayClient(url: url, auth: .dev(uid: "alice", name: "Alice", role: "host"))
// Bob keeps his place in a file, as an app woken by a VoIP push would (resumed: false
// here: a first launch has nothing to resume).
var bobOptions = RelayClientOptions()
bobOptions.persistence = .file(URL(fileURLWithPath: NSTemporaryDirectory()).appendingPathComponent("relay-consumer-\\(ProcessInfo.processInfo.processIdentifier).json"))
let bob = RelayClient(url: url, auth: .dev(uid: "bob", name: "Bob"), options: bobOptions)
let ringer = Ringer(client: bob)
bob.addCallListener(id: "ringer", ringer)
let events = alice.events
do {
  try await alice.connect()
  try await bob.connect()
  let room: SessionState = try await alice.joinSession(sessionID: "room")
  print("joined \\(room.id) \\(room.participants.map(\\.uid))")
  let seen: SessionState = try await bob.joinSession(sessionID: "room")
  print("bob sees \\(seen.participants.map(\\.uid))")
  try await bob.raiseHand(sessionID: "room")
  let call = try await alice.initiateCall(to: ["bob"], callType: .video)
  print("calling \\(call.to) \\(call.status.rawValue)")
  // Push (§9a): a PushKit token for this install's device id, and a payload decoded
  // without a client, as an app woken by a push does it.
  try await bob.registerPushToken(Data(repeating: 0xab, count: 32), kind: .apnsVoip, environment: .sandbox)
  let push = RelayPush.decode(dictionaryPayload: ["relay": ["type": "call.cancelled", "callId": call.id, "reason": "unanswered"]])
  let api = RelayHTTPAPI(relayURL: url, token: "", device: bob.deviceID)
  print("push \\(bob.deviceID.map(DeviceID.isValid) ?? false) \\(push?.callID == call.id) \\(api.baseURL.scheme ?? "") \\(bob.state.resumed)")
  loop: for await event in events {
    switch event {
    case .participantJoined(let session, let p): print("event participantJoined \\(session) \\(p.uid)")
    case .handRaised(let session, let hand): print("event handRaised \\(session) \\(hand.uid)")
    case .outgoingCallAccepted(let accepted, let by):
      print("event accepted \\(by) \\(accepted.id == call.id)")
      break loop
    default: break
    }
  }
  print("hands \\(alice.state.raisedHands(in: "room").map(\\.uid))")
} catch {
  print("error \\(error)")
  exit(1)
}
alice.disconnect()
bob.disconnect()
print("done")
"""


def git(*args: str, cwd: Path) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="test", GIT_AUTHOR_EMAIL="test@localhost",
               GIT_COMMITTER_NAME="test", GIT_COMMITTER_EMAIL="test@localhost")
    run = subprocess.run(["git", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, f"git {' '.join(args)}: {run.stderr}"
    return run.stdout


def tagged_clone(dest: Path) -> Path:
    """A clone of ROOT whose tag TAG is the working tree as it is now."""
    git("clone", "--quiet", "--no-checkout", str(ROOT), str(dest), cwd=dest.parent)
    # The work tree's files (ignored ones excluded) become one commit on top, so the
    # test checks what is on disk, committed or not.
    git("--work-tree", str(ROOT), "add", "--all", ".", cwd=dest)
    git("commit", "--quiet", "--allow-empty", "-m", "snapshot of the work tree", cwd=dest)
    git("tag", TAG, cwd=dest)
    git("reset", "--quiet", "--hard", TAG, cwd=dest)  # the files of the index written out
    return dest


@pytest.mark.timeout(BUILD_TIMEOUT_S + 120)
def test_versioned_dependency_builds_and_runs(relay, tmp_path):
    swift = shutil.which("swift")
    assert swift, "swift not on PATH"
    repo = tagged_clone(tmp_path / "relay")
    assert not (repo / ".build").exists()
    assert ".unsafeFlags(" not in (repo / "Package.swift").read_text()

    consumer = tmp_path / "consumer"
    (consumer / "Sources" / "RelayConsumer").mkdir(parents=True)
    (consumer / "Package.swift").write_text(CONSUMER_MANIFEST.format(url=repo.as_uri(), tag=TAG))
    (consumer / "Sources" / "RelayConsumer" / "main.swift").write_text(CONSUMER_MAIN)

    build = subprocess.run(
        [swift, "build", "--package-path", str(consumer), "--scratch-path", str(tmp_path / "scratch"),
         "--cache-path", str(tmp_path / "swiftpm-cache")],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT_S,
    )
    assert build.returncode == 0, build.stdout[-6000:] + build.stderr[-4000:]
    resolved = subprocess.run(
        [swift, "package", "--package-path", str(consumer), "--scratch-path", str(tmp_path / "scratch"),
         "--cache-path", str(tmp_path / "swiftpm-cache"), "show-dependencies", "--format", "json"],
        capture_output=True, text=True, timeout=120,
    )
    assert resolved.returncode == 0, resolved.stderr
    relay_dep = next(d for d in json.loads(resolved.stdout)["dependencies"] if d["identity"] == "relay")
    assert relay_dep["version"] == TAG, relay_dep  # by tag, not a branch or a revision

    binary = tmp_path / "scratch" / "debug" / "RelayConsumer"
    run = subprocess.run([str(binary), f"{relay.ws}/v1/ws"], capture_output=True, text=True, timeout=60)
    out = run.stdout.splitlines()
    assert run.returncode == 0, run.stdout + run.stderr
    assert "listener incoming alice video" in out, out
    assert "push true true http false" in out, out
    # Bob's listener runs on his client's queue: its line may come before or after
    # Alice's `initiateCall` returns. The others are in Alice's order.
    ordered = [line for line in out if line != "listener incoming alice video" and not line.startswith("push ")]
    assert ordered[0] == 'joined room ["alice"]', out
    assert ordered[1] == 'bob sees ["alice", "bob"]', out
    assert ordered[2] == 'calling ["bob"] ringing', out
    events = [line for line in out if line.startswith("event ")]
    assert events == ["event participantJoined room bob", "event handRaised room bob", "event accepted bob true"], out
    assert out[-2:] == ['hands ["bob"]', "done"], out
