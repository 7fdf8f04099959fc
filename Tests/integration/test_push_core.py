"""Push decisions (contract §4 hello.device, §9a) against the real binary: devices
register over the WebSocket and over HTTP, bad tokens are `bad_request` (never a
crash), and the core's decisions — which device gets a ring push, which a follow-up —
are read from the relay's debug log (`push job: kind=… device=… uid=… call=…
message=…`), one line per job the node performs. In a 3-node cluster a registration
made on one node drives the push for a call started on another, exactly once."""
from __future__ import annotations

import json
import os
import re
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from cluster import _terminate, _wait, cluster  # noqa: F401  (fixture)
from conftest import relay_binary, free_port, START_TIMEOUT_S
from relayclient import Client, claims, make_jwt
from test_cluster import FLAGS

SECRET = "push-secret"
VOIP = "ab" * 32
ALERT = "cd" * 32
PUSH_LINE = re.compile(r"push job: (kind=\S+ device=\S+ uid=\S+ call=\S+ message=\S+)")


class LoggedRelay:
    """A standalone relay at --log-level debug whose output goes to a file."""

    def __init__(self, workdir: Path, *args: str):
        self.port = free_port()
        self.log_path = workdir / f"relay-{self.port}.log"
        env = {k: v for k, v in os.environ.items() if k not in ("RELAY_SECRET", "RELAY_ADMIN_KEY")}
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(
                [relay_binary(), "serve", "--listen", f"127.0.0.1:{self.port}", "--log-level", "debug", *args],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        _wait(self._healthy, START_TIMEOUT_S, "relay healthy")

    def _healthy(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"relay exited:\n{self.log_path.read_text(errors='replace')}")
        try:
            with urllib.request.urlopen(self.http + "/healthz", timeout=1) as r:
                return r.status == 200
        except OSError:
            return False

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


@pytest.fixture
def logged_relay(tmp_path):
    started: list[LoggedRelay] = []

    def start(*args: str) -> LoggedRelay:
        r = LoggedRelay(tmp_path, *args)
        started.append(r)
        return r

    yield start
    for r in started:
        _terminate(r.proc)


def pushes(*log_paths: Path) -> list[str]:
    out = []
    for path in log_paths:
        out += PUSH_LINE.findall(path.read_text(errors="replace"))
    return out


def wait_pushes(predicate, *log_paths: Path, what: str) -> list[str]:
    """Polls the logs (a log line has no event to await) until `predicate` holds."""
    _wait(lambda: predicate(pushes(*log_paths)), 10, what)
    return pushes(*log_paths)


def line(kind: str, device: str, call: str, message: str = "ring", uid: str = "bob") -> str:
    return f"kind={kind} device={device} uid={uid} call={call} message={message}"


async def hello(base_ws: str, uid: str, device: str | None = None, token: str | None = None) -> Client:
    c = await Client.connect(base_ws)
    msg: dict = {"type": "hello", "id": "h"}
    if token:
        msg["token"] = token
    else:
        msg["dev"] = {"uid": uid, "name": uid.title()}
    if device:
        msg["device"] = device
    await c.send(msg)
    welcome = await c.recv()
    assert welcome["type"] == "welcome", welcome
    return c


async def register(c: Client, token: str, kind: str, **extra) -> dict:
    await c.send({"type": "push.register", "id": "r", "token": token, "kind": kind, **extra})
    return await c.recv()


async def call(caller: Client, to: str) -> tuple[str, dict]:
    await caller.send({"type": "call.initiate", "id": "i", "to": [to], "callType": "audio"})
    ok = await caller.recv_type("ok")
    first = await caller.recv()
    return ok["callId"], first


def http(base: str, method: str, path: str, body=None, token: str | None = None, raw: bytes | None = None):
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    req = urllib.request.Request(base + path, method=method, data=data)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def metric(base: str, name: str) -> float:
    with urllib.request.urlopen(base + "/metrics", timeout=5) as r:
        for text in r.read().decode().splitlines():
            if text.startswith(name + " "):
                return float(text.split()[1])
    raise KeyError(name)


# --- registration ---------------------------------------------------------------------


async def test_register_over_websocket_and_http(logged_relay):
    relay = logged_relay("--secret", SECRET)
    bob_token = make_jwt(SECRET, claims("bob"))
    bob = await hello(relay.ws, "bob", device="phone", token=bob_token)
    assert await register(bob, VOIP.upper(), "apns-voip", environment="sandbox") == {"type": "ok", "re": "r"}
    for bad in [("abc", "apns-voip", {}), ("x" * 4097, "fcm", {}), ("f", "fcm", {"environment": "sandbox"}),
                ("f", "hms", {}), ("f", "fcm", {"device": "no/slash"}), ("\u0007", "fcm", {})]:
        reply = await register(bob, bad[0], bad[1], **bad[2])
        assert reply["type"] == "error" and reply["code"] == "bad_request" and reply["re"] == "r", (bad, reply)
    await bob.send({"type": "ping", "id": "p"})
    assert (await bob.recv())["type"] == "pong", "the connection survives bad registrations"
    assert http(relay.http, "PUT", "/v1/push/devices/tablet", {"token": "fcm-1", "kind": "fcm"}, bob_token) == (204, b"")
    assert metric(relay.http, "relay_push_registrations") == 2
    status, body = http(relay.http, "PUT", "/v1/push/devices/tablet", {"token": "f", "kind": "apns"}, bob_token)
    assert status == 400 and json.loads(body)["code"] == "bad_request"
    assert http(relay.http, "PUT", "/v1/push/devices/tablet", raw=b"{nope", token=bob_token)[0] == 400
    assert http(relay.http, "PUT", "/v1/push/devices/bad%20id", {"token": "f", "kind": "fcm"}, bob_token)[0] == 400
    assert http(relay.http, "PUT", "/v1/push/devices/tablet", {"token": "f", "kind": "fcm"})[0] == 401
    assert http(relay.http, "PUT", "/v1/push/devices/tablet", {"token": "f", "kind": "fcm"}, "forged")[0] == 401
    assert http(relay.http, "POST", "/v1/push/devices/tablet", {"token": "f", "kind": "fcm"}, bob_token)[0] == 405
    assert http(relay.http, "DELETE", "/v1/push/devices/tablet", token=bob_token) == (204, b"")
    assert metric(relay.http, "relay_push_registrations") == 1
    await bob.send({"type": "push.unregister", "id": "u", "token": VOIP})
    assert await bob.recv() == {"type": "ok", "re": "u"}
    assert metric(relay.http, "relay_push_registrations") == 0
    assert relay.proc.poll() is None


# --- decisions ------------------------------------------------------------------------


async def test_killed_backgrounded_and_foreground_devices(logged_relay):
    relay = logged_relay()
    # bob's tablet registers, then its app is killed (the socket closes).
    tablet = await hello(relay.ws, "bob", device="tablet")
    assert (await register(tablet, "fcm-tablet", "fcm"))["type"] == "ok"
    await tablet.close()
    phone = await hello(relay.ws, "bob", device="phone")
    assert (await register(phone, VOIP, "apns-voip"))["type"] == "ok"
    assert (await register(phone, ALERT, "apns"))["type"] == "ok"
    alice = await hello(relay.ws, "alice")
    call_id, ringing = await call(alice, "bob")
    assert ringing == {"type": "call.ringing", "callId": call_id, "uid": "bob", "pushed": 1}
    assert (await phone.recv_type("call.incoming"))["callId"] == call_id, "the awake phone rings over its socket"
    wait_pushes(lambda p: len(p) >= 1, relay.log_path, what="the tablet's ring push")
    # The phone goes to the background mid-ring: pushed then, once.
    await phone.send({"type": "client.background", "id": "b", "background": True})
    await phone.recv_type("ok")
    wait_pushes(lambda p: len(p) >= 2, relay.log_path, what="the phone's ring push")
    await phone.close()
    await alice.send({"type": "call.cancel", "id": "x", "callId": call_id})
    await alice.recv_type("ok")
    got = wait_pushes(lambda p: len(p) >= 4, relay.log_path, what="the follow-ups")
    assert got == [
        line("fcm", "tablet", call_id), line("apns-voip", "phone", call_id),
        line("fcm", "tablet", call_id, "ended(cancelled)"), line("apns", "phone", call_id, "ended(cancelled)"),
    ]
    # A second call: both devices asleep now, each pushed once, in registration order.
    call2, offline = await call(alice, "bob")
    assert offline == {"type": "call.offline", "callId": call2, "uid": "bob", "pushed": 2}
    got = wait_pushes(lambda p: len(p) >= 6, relay.log_path, what="the second call's pushes")
    assert got[4:] == [line("fcm", "tablet", call2), line("apns-voip", "phone", call2)]
    assert metric(relay.http, "relay_push_jobs_total") == 6


async def test_two_devices_one_awake_then_accept_elsewhere(logged_relay):
    relay = logged_relay()
    tablet = await hello(relay.ws, "bob", device="tablet")
    assert (await register(tablet, "fcm-tablet", "fcm"))["type"] == "ok"
    assert (await register(tablet, VOIP, "apns-voip", device="phone"))["type"] == "ok"
    alice = await hello(relay.ws, "alice")
    call_id, ringing = await call(alice, "bob")
    assert ringing["pushed"] == 1
    await tablet.recv_type("call.incoming")
    await tablet.send({"type": "call.accept", "id": "a", "callId": call_id})
    await tablet.recv_type("ok")
    await alice.recv_type("call.accepted")
    # The phone was pushed; answered elsewhere reaches fcm tokens only: no follow-up.
    # (Jobs are logged in the loop turn that applies the command, before its `ok`.)
    assert pushes(relay.log_path) == [line("apns-voip", "phone", call_id)]


# --- cluster --------------------------------------------------------------------------


async def test_registration_on_one_node_pushes_once_for_a_call_on_another(cluster):
    n1, n2, n3 = [cluster.node(*FLAGS, "--log-level", "debug", "--secret", SECRET) for _ in range(3)]
    logs = [n.log_path for n in (n1, n2, n3)]

    def user(uid: str) -> str:
        return make_jwt(SECRET, claims(uid))

    # bob's app registers over HTTP on n1 (its socket is not up); the marker user
    # over a socket on n1.
    assert http(n1.http, "PUT", "/v1/push/devices/phone", {"token": "fcm-bob", "kind": "fcm"}, user("bob"))[0] == 204
    marker = await hello(n1.ws, "marker", device="m", token=user("marker"))
    assert (await register(marker, "fcm-marker", "fcm"))["type"] == "ok"
    await marker.close()
    alice = await hello(n2.ws, "alice", token=user("alice"))
    call_id, offline = await call(alice, "bob")
    assert offline == {"type": "call.offline", "callId": call_id, "uid": "bob", "pushed": 1}
    await alice.send({"type": "call.cancel", "id": "x", "callId": call_id})
    await alice.recv_type("ok")
    # Each node rings the marker user from a call of its own: its line shows that node
    # has applied every earlier record, so a duplicate of bob's pushes would be there.
    callers = [alice, await hello(n1.ws, "carol", token=user("carol")), await hello(n3.ws, "dave", token=user("dave"))]
    for caller in callers:
        await call(caller, "marker")
    for path in logs:
        _wait(lambda: any("uid=marker" in p for p in pushes(path)), 10, f"marker push in {path.name}")
    bob_lines = [p for p in pushes(*logs) if "uid=bob" in p]
    assert bob_lines == [line("fcm", "phone", call_id), line("fcm", "phone", call_id, "ended(cancelled)")]
    assert [p for p in pushes(logs[1]) if "uid=bob" in p] == bob_lines, "the node that logged the call sends"
    assert n3.metric("relay_push_registrations") == 2
