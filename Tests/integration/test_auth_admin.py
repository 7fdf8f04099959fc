"""Identity (contract §3), lifecycle errors (§4), admin API and metrics (§10),
and bad input that must never cost the connection or its neighbours (§2)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import time
import urllib.request
from urllib.error import HTTPError

import pytest

from conftest import RelayProcess, relay_binary
from relayclient import Client, claims, make_jwt

SECRET = "s3cret-for-tests"
ADMIN = "admin-key-for-tests"


def http(method: str, url: str, body: dict | None = None, key: str | None = None):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if key:
        req.add_header("Authorization", f"Bearer {key}")
    if data:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def token_relay(relay_factory):
    return relay_factory("--secret", SECRET, "--admin-key", ADMIN)


# --- §3 token checks ---------------------------------------------------------

REJECTED = {
    "bad signature": lambda: make_jwt(SECRET, claims(), sign_with="wrong"),
    "alg none": lambda: make_jwt(SECRET, claims(), alg="none"),
    "alg HS512": lambda: make_jwt(SECRET, claims(), alg="HS512"),
    "missing sub": lambda: make_jwt(SECRET, {"exp": int(time.time()) + 60}),
    "missing exp": lambda: make_jwt(SECRET, {"sub": "alice"}),
    "expired beyond leeway": lambda: make_jwt(SECRET, claims(ttl_s=-31)),
    "nbf beyond leeway": lambda: make_jwt(SECRET, claims(nbf=int(time.time()) + 31)),
    "garbage": lambda: "not.a.jwt",
}


@pytest.mark.parametrize("case", sorted(REJECTED))
async def test_rejected_tokens_close_4501(token_relay, case):
    c = await Client.connect(token_relay.ws)
    await c.send({"type": "hello", "token": REJECTED[case]()})
    assert await c.expect_close() == 4501


async def test_leeway_accepts_recently_expired_and_slightly_early(token_relay):
    for t in (make_jwt(SECRET, claims(ttl_s=-20)), make_jwt(SECRET, claims(nbf=int(time.time()) + 20))):
        c = await Client.connect(token_relay.ws)
        welcome = await c.hello_token(t)
        assert welcome["type"] == "welcome" and welcome["user"]["uid"] == "alice"
        await c.close()


async def test_welcome_carries_claims(token_relay):
    c = await Client.connect(token_relay.ws)
    w = await c.hello_token(make_jwt(SECRET, claims(sub="bob", name="Bob", avatar="https://a/b.png", role="host")))
    assert w["type"] == "welcome" and w["re"] == "hello"
    assert w["user"] == {"uid": "bob", "name": "Bob", "avatar": "https://a/b.png", "role": "host"}
    assert w["resumed"] is False and w["heartbeat"] == {"interval": 10000, "timeout": 15000}
    assert isinstance(w["resumeToken"], str) and len(w["resumeToken"]) >= 16


async def test_sessions_claim_restricts_join(token_relay):
    c = await Client.connect(token_relay.ws)
    await c.hello_token(make_jwt(SECRET, claims(sessions=["room-a"])))
    await c.send({"type": "session.join", "id": "1", "session": "room-b"})
    err = await c.recv()
    assert err["type"] == "error" and err["re"] == "1" and err["code"] == "forbidden"
    await c.send({"type": "session.join", "id": "2", "session": "room-a"})
    assert (await c.recv()) == {"type": "ok", "re": "2"}


async def test_dev_hello_refused_when_a_secret_is_set(token_relay):
    c = await Client.connect(token_relay.ws)
    await c.send({"type": "hello", "dev": {"uid": "eve", "name": "Eve"}})
    assert await c.expect_close() == 4501


async def test_token_refused_in_dev_mode(relay):
    c = await Client.connect(relay.ws)
    await c.send({"type": "hello", "token": make_jwt(SECRET, claims())})
    assert await c.expect_close() == 4501


# --- §4 lifecycle errors -----------------------------------------------------

async def test_command_before_hello_is_unauthorized_then_4501(relay):
    c = await Client.connect(relay.ws)
    await c.send({"type": "session.join", "id": "x", "session": "s"})
    err = await c.recv()
    assert err["type"] == "error" and err["code"] == "unauthorized" and err["re"] == "x"
    assert await c.expect_close() == 4501


async def test_no_hello_in_time_closes_4501(relay_factory):
    r = relay_factory("--hello-timeout", "300")
    c = await Client.connect(r.ws)
    assert await c.expect_close(timeout=5) == 4501


def test_dev_mode_refuses_non_loopback():
    proc = subprocess.run([relay_binary(), "serve", "--listen", "0.0.0.0:0"], capture_output=True, timeout=20)
    assert proc.returncode != 0
    assert b"loopback" in (proc.stdout + proc.stderr)


# --- §2 bad input ------------------------------------------------------------

BAD = [
    ("not json", "bad_request"),
    ("[1,2,3]", "bad_request"),
    ('"just a string"', "bad_request"),
    ('{"id": "1"}', "bad_request"),
    ('{"type": 42}', "bad_request"),
    ('{"type": "session.join", "session": 7}', "bad_request"),
    ('{"type": "no.such.thing"}', "unknown_type"),
    ("[" * 10000 + "]" * 10000, "bad_request"),
    ('{"type": "session.join", "session": "' + "x" * 60 * 1024 + '"}', None),
    ('{"type": "ping", "n": 1e400, "m": 123456789012345678901234567890}', "pong"),
]


async def test_bad_input_gets_errors_and_keeps_everyone_served(relay):
    a = await Client.connect(relay.ws)
    b = await Client.connect(relay.ws)
    await a.hello_dev("alice")
    await b.hello_dev("bob")
    await b.send({"type": "session.join", "session": "room"})
    await b.recv_type("session.joined")
    for raw, expected in BAD:
        await a.send(raw)
        reply = await a.recv()
        if expected == "pong":
            assert reply["type"] == "pong"
        elif expected is None:
            assert reply["type"] in ("error", "session.joined", "ok"), reply
        else:
            assert reply["type"] == "error" and reply["code"] == expected, (raw[:40], reply)
    # Still connected and served, and the neighbour too.
    await a.send({"type": "ping", "id": "p"})
    assert (await a.recv()) == {"type": "pong", "re": "p"}
    await b.send({"type": "ping", "id": "q"})
    assert (await b.recv()) == {"type": "pong", "re": "q"}


async def test_run_of_bad_messages_closes_4029_and_good_one_resets(relay_factory):
    r = relay_factory("--max-bad-messages", "3")
    c = await Client.connect(r.ws)
    await c.hello_dev("alice")
    for _ in range(2):
        await c.send("nope")
        await c.recv()
    await c.send({"type": "ping"})  # an accepted command resets the run
    await c.recv()
    for _ in range(2):
        await c.send("nope")
        await c.recv()
    await c.send({"type": "ping", "id": "still"})
    assert (await c.recv())["type"] == "pong"
    for _ in range(3):
        await c.send("nope")
    assert await c.expect_close() == 4029


async def test_binary_message_on_relay_endpoint_closes_1003(relay):
    c = await Client.connect(relay.ws)
    await c.hello_dev("alice")
    await c.ws.send(b"\x00\x01")
    assert await c.expect_close() == 1003


async def test_oversized_message_closes_1009(relay_factory):
    r = relay_factory("--max-message-bytes", "1024")
    c = await Client.connect(r.ws)
    await c.hello_dev("alice")
    await c.send({"type": "ping", "pad": "x" * 2000})
    assert await c.expect_close() == 1009


# --- §10 admin API and metrics ------------------------------------------------

def test_admin_requires_key(token_relay, relay):
    for base in (token_relay.http, relay.http):
        assert http("POST", base + "/v1/sessions")[0] == 401
        assert http("POST", base + "/v1/sessions", key="wrong")[0] == 401
    status, body = http("POST", token_relay.http + "/v1/sessions", key="wrong")
    assert status == 401 and body == b""


async def test_admin_session_lifecycle(token_relay):
    status, body = http("POST", token_relay.http + "/v1/sessions", key=ADMIN)
    assert status == 200  # protocol/PROTOCOL.md §11 example
    sid = json.loads(body)["sessionId"]
    assert len(sid) >= 21 and all(ch.isalnum() or ch in "-_" for ch in sid)
    status, body = http("GET", token_relay.http + f"/v1/sessions/{sid}", key=ADMIN)
    assert status == 200 and json.loads(body)["participants"] == []
    assert http("GET", token_relay.http + "/v1/sessions/nope", key=ADMIN)[0] == 404

    status, body = http("POST", token_relay.http + "/v1/tokens", {"sub": "carol", "name": "Carol", "sessions": [sid]}, key=ADMIN)
    assert status == 200
    token = json.loads(body)["token"]
    c = await Client.connect(token_relay.ws)
    assert (await c.hello_token(token))["user"]["uid"] == "carol"
    await c.send({"type": "session.join", "session": sid})
    await c.recv_type("session.joined")
    info = json.loads(http("GET", token_relay.http + f"/v1/sessions/{sid}", key=ADMIN)[1])
    assert [p["uid"] for p in info["participants"]] == ["carol"]

    assert http("DELETE", token_relay.http + f"/v1/sessions/{sid}/participants/nobody", key=ADMIN)[0] == 404
    assert http("DELETE", token_relay.http + f"/v1/sessions/{sid}/participants/carol", key=ADMIN)[0] in (200, 204)
    left = await c.recv_type("session.left")
    assert left["reason"] == "removed" and left["session"] == sid


def test_token_minting_is_401_in_dev_mode(relay_factory):
    r = relay_factory("--admin-key", ADMIN)
    assert http("POST", r.http + "/v1/tokens", {"sub": "x"}, key=ADMIN)[0] == 401


BAD_TTLS = ["9223372036854775807", "9223372036854775808", "1.5", "1e308", "1e3", "0", "-5", "315360000001", '"60000"', "null"]


@pytest.mark.parametrize("ttl", BAD_TTLS)
def test_token_ttl_out_of_range_is_400_and_the_relay_lives(token_relay, ttl):
    """§10: arithmetic on input never traps; a ttl that is not an integer in range is a 400."""
    req = urllib.request.Request(token_relay.http + "/v1/tokens", data=('{"sub":"a","ttl":%s}' % ttl).encode(), method="POST")
    req.add_header("Authorization", f"Bearer {ADMIN}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            status = r.status
    except HTTPError as e:
        status, body = e.code, json.loads(e.read())
        assert body["error"] == "bad_request"
    assert status == 400
    assert http("GET", token_relay.http + "/healthz")[0] == 200
    assert token_relay.proc.poll() is None


def test_token_ttl_at_the_limit_is_minted(token_relay):
    status, body = http("POST", token_relay.http + "/v1/tokens", {"sub": "a", "ttl": 315360000000}, key=ADMIN)
    assert status == 200 and json.loads(body)["token"].count(".") == 2


@pytest.mark.parametrize("ttl", ["9223372036854775807", "9223372036854775808", "1.5", "0", "315360000001"])
def test_relay_token_refuses_a_ttl_out_of_range(ttl):
    proc = subprocess.run([relay_binary(), "token", "--secret", SECRET, "--sub", "a", "--ttl", ttl], capture_output=True, timeout=20)
    assert proc.returncode not in (0, 132, -4), proc.returncode  # a usage error, not SIGILL
    assert b"ttl" in proc.stderr.lower() and proc.stdout == b""


def test_relay_token_command_mints_a_verifiable_token():
    out = subprocess.run(
        [relay_binary(), "token", "--secret", SECRET, "--sub", "dave", "--name", "Dave", "--sessions", "a,b", "--role", "host", "--ttl", "60000"],
        capture_output=True, timeout=20, check=True).stdout.decode().strip()
    import base64
    header, payload, sig = out.split(".")
    body = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    assert body["sub"] == "dave" and body["sessions"] == ["a", "b"] and body["role"] == "host"
    assert 55 <= body["exp"] - int(time.time()) <= 61


async def test_relay_token_is_accepted_by_relay(token_relay):
    out = subprocess.run([relay_binary(), "token", "--secret", SECRET, "--sub", "erin"], capture_output=True, timeout=20, check=True).stdout.decode().strip()
    c = await Client.connect(token_relay.ws)
    assert (await c.hello_token(out))["user"]["uid"] == "erin"


async def test_metrics_expose_counters(relay):
    c = await Client.connect(relay.ws)
    await c.hello_dev("alice")
    await c.send({"type": "session.join", "session": "m"})
    await c.recv_type("session.joined")
    await c.send({"type": "message.send", "session": "m", "data": 1})
    await c.recv_type("message")
    status, body = http("GET", relay.http + "/metrics")
    text = body.decode()
    assert status == 200
    for name in ("relay_connections_open", "relay_sessions", "relay_participants", "relay_commands_total",
                 "relay_events_total", "relay_fanout_deliveries_total", "relay_bytes_in_total",
                 "relay_bytes_out_total", "relay_command_duration_seconds", "relay_heap_in_use_bytes"):
        assert name in text, name
    assert 'relay_commands_total{type="message.send"} 1' in text


def test_port_in_use_is_a_clear_error_not_a_crash(relay):
    proc = subprocess.run([relay_binary(), "serve", "--listen", f"127.0.0.1:{relay.port}"], capture_output=True, timeout=20)
    assert proc.returncode == 1
    assert b"EADDRINUSE" in proc.stdout + proc.stderr
    assert b"crashed" not in proc.stdout + proc.stderr
