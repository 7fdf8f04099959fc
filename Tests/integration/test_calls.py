"""Ringing (contract §9) over real sockets: every outcome, two devices of one callee
(two connections with the same uid), an offline callee that connects while the call
rings, busy, the ring timeout, the rate limit, and the HTTP call API in token mode
(idempotent actions, 404 for non-parties, 401 without a valid token)."""
from __future__ import annotations

import asyncio
import json
import subprocess
import urllib.request
from urllib.error import HTTPError

import pytest

from conftest import relay_binary
from relayclient import Client

SECRET = "calls-secret"


async def dev(relay, uid: str) -> Client:
    c = await Client.connect(relay.ws)
    await c.hello_dev(uid)
    return c


async def nothing(c: Client, seconds: float = 0.3) -> None:
    """A bounded negative check: no message within `seconds`."""
    with pytest.raises(asyncio.TimeoutError):
        msg = await c.recv(timeout=seconds)
        pytest.fail(f"unexpected message {msg}")


async def initiate(caller: Client, to: list[str], call_type: str = "video", **extra) -> tuple[str, str]:
    await caller.send({"type": "call.initiate", "id": "init", "to": to, "callType": call_type, **extra})
    ok = await caller.recv()
    assert ok["type"] == "ok" and ok["re"] == "init", ok
    return ok["callId"], ok["sessionId"]


async def command(c: Client, type_: str, call_id: str, id_: str = "cmd", **extra) -> dict:
    await c.send({"type": type_, "id": id_, "callId": call_id, **extra})
    return await c.recv()


def incoming(call_id: str, session_id: str, to: list[str], call_type: str = "video", caller: str = "alice") -> dict:
    return {"callId": call_id, "sessionId": session_id, "from": {"uid": caller, "name": caller.title()}, "to": to,
            "callType": call_type}


def subset(msg: dict, expected: dict) -> bool:
    return all(msg.get(k) == v for k, v in expected.items())


# --- WebSocket commands (dev mode) --------------------------------------------------


async def test_accept_on_one_device_then_end(relay):
    alice, bob1, bob2 = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "bob")
    call, session = await initiate(alice, ["bob"], metadata={"topic": "standup"})
    assert await alice.recv() == {"type": "call.ringing", "callId": call, "uid": "bob", "pushed": 0}
    for device in (bob1, bob2):
        msg = await device.recv()
        assert msg["type"] == "call.incoming" and subset(msg, incoming(call, session, ["bob"])), msg
        assert msg["metadata"] == {"topic": "standup"} and isinstance(msg["expiresAt"], int)
    assert await command(bob1, "call.accept", call, "a1") == {"type": "ok", "re": "a1"}
    accepted = {"type": "call.accepted", "callId": call, "uid": "bob", "sessionId": session}
    assert await bob1.recv() == accepted
    assert await alice.recv() == accepted
    assert await bob2.recv() == {"type": "call.cancelled", "callId": call, "reason": "answered_elsewhere"}
    for who in (alice, bob1):
        await who.send({"type": "session.join", "id": "j", "session": session})
        assert (await who.recv())["type"] == "ok"
        assert (await who.recv_type("session.joined"))["session"] == session
    await alice.recv_type("participant.joined")
    assert await command(alice, "call.end", call, "e1") == {"type": "ok", "re": "e1"}
    for who in (alice, bob1):
        ended = await who.recv()
        assert subset(ended, {"type": "call.ended", "callId": call, "by": "alice", "reason": "ended"}), ended
        assert isinstance(ended["duration"], int) and ended["duration"] >= 0
    await nothing(bob2)
    again = await command(bob1, "call.end", call, "e2")
    assert again["code"] == "conflict" and again["re"] == "e2"
    assert (await command(bob1, "call.accept", "no-such-call"))["code"] == "not_found"


async def test_reject_stops_the_other_device(relay):
    alice, bob1, bob2 = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "bob")
    call, _ = await initiate(alice, ["bob"], "audio")
    await alice.recv_type("call.ringing")
    await bob1.recv_type("call.incoming")
    await bob2.recv_type("call.incoming")
    assert await command(bob1, "call.reject", call, "r") == {"type": "ok", "re": "r"}
    assert await alice.recv() == {"type": "call.rejected", "callId": call, "uid": "bob", "reason": "declined"}
    assert await bob2.recv() == {"type": "call.cancelled", "callId": call, "reason": "rejected_elsewhere"}
    await nothing(bob1, 0.2)
    assert (await command(bob2, "call.accept", call))["code"] == "conflict"


async def test_reject_reason_busy_and_cancel_of_the_rest(relay):
    alice, bob, carol = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "carol")
    call, _ = await initiate(alice, ["bob", "carol"])
    ringing = [await alice.recv(), await alice.recv()]
    assert sorted(m["uid"] for m in ringing) == ["bob", "carol"]
    await bob.recv_type("call.incoming")
    await carol.recv_type("call.incoming")
    await command(carol, "call.reject", call, reason="busy")
    assert await alice.recv() == {"type": "call.rejected", "callId": call, "uid": "carol", "reason": "busy"}
    assert await command(alice, "call.cancel", call, "x") == {"type": "ok", "re": "x"}
    assert await bob.recv() == {"type": "call.cancelled", "callId": call, "reason": "cancelled"}
    await nothing(carol, 0.2)
    again = await command(alice, "call.cancel", call, "x2")
    assert again["code"] == "conflict"
    assert (await command(bob, "call.accept", call))["code"] == "conflict"


async def test_busy_callee_is_not_rung(relay):
    alice, bob, carol = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "carol")
    call, _ = await initiate(alice, ["bob"])
    await bob.recv_type("call.incoming")
    await command(bob, "call.accept", call)
    call2, _ = await initiate(carol, ["bob"], "audio")
    assert await carol.recv() == {"type": "call.busy", "callId": call2, "uid": "bob"}
    await bob.recv_type("call.accepted")
    await nothing(bob)


async def test_ring_timeout(relay_factory):
    relay = relay_factory("--ring-timeout", "500")
    alice, bob = await dev(relay, "alice"), await dev(relay, "bob")
    call, _ = await initiate(alice, ["bob", "dave"])
    first = [await alice.recv(), await alice.recv()]
    assert {(m["type"], m["uid"]) for m in first} == {("call.ringing", "bob"), ("call.offline", "dave")}
    await bob.recv_type("call.incoming")
    assert await bob.recv(timeout=3) == {"type": "call.cancelled", "callId": call, "reason": "unanswered"}
    late = [await alice.recv(timeout=3), await alice.recv(timeout=3)]
    assert sorted((m["type"], m["uid"]) for m in late) == [("call.unanswered", "bob"), ("call.unanswered", "dave")]
    assert (await command(bob, "call.accept", call, "late"))["code"] == "conflict"


async def test_offline_callee_gets_incoming_right_after_welcome(relay):
    alice = await dev(relay, "alice")
    call, session = await initiate(alice, ["bob"])
    assert await alice.recv() == {"type": "call.offline", "callId": call, "uid": "bob", "pushed": 0}
    bob = await Client.connect(relay.ws)
    await bob.send({"type": "hello", "id": "h", "dev": {"uid": "bob", "name": "Bob"}})
    assert (await bob.recv())["type"] == "welcome"
    msg = await bob.recv()
    assert msg["type"] == "call.incoming" and subset(msg, incoming(call, session, ["bob"])), msg
    await command(bob, "call.accept", call)
    assert (await alice.recv())["type"] == "call.accepted"


async def test_several_callees_answer_for_themselves(relay):
    alice, bob, carol = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "carol")
    call, session = await initiate(alice, ["bob", "carol"])
    await alice.recv(), await alice.recv()
    for uid, who in (("bob", bob), ("carol", carol)):
        await who.recv_type("call.incoming")
        await command(who, "call.accept", call)
        accepted = {"type": "call.accepted", "callId": call, "uid": uid, "sessionId": session}
        assert await who.recv() == accepted
        assert await alice.recv() == accepted
    assert await command(carol, "call.end", call) == {"type": "ok", "re": "cmd"}
    for who in (alice, bob, carol):
        ended = await who.recv()
        assert subset(ended, {"type": "call.ended", "by": "carol", "reason": "ended"}), ended


async def test_refusals(relay):
    alice, bob, carol = await dev(relay, "alice"), await dev(relay, "bob"), await dev(relay, "carol")
    call, _ = await initiate(alice, ["bob"])
    await alice.recv_type("call.ringing")
    await bob.recv_type("call.incoming")
    assert (await command(alice, "call.accept", call))["code"] == "forbidden"
    assert (await command(bob, "call.cancel", call))["code"] == "forbidden"
    assert (await command(carol, "call.accept", call))["code"] == "not_found"
    assert (await command(alice, "call.end", call))["code"] == "conflict"
    await bob.send({"type": "call.initiate", "id": "bad", "to": [], "callType": "video"})
    assert (await bob.recv_type("error"))["code"] == "bad_request"


async def test_initiate_rate_limit(relay):
    alice = await dev(relay, "alice")
    for _ in range(10):
        await initiate(alice, ["nobody"])
        await alice.recv_type("call.offline")
    await alice.send({"type": "call.initiate", "id": "11", "to": ["nobody"], "callType": "audio"})
    reply = await alice.recv()
    assert reply["code"] == "rate_limited" and reply["re"] == "11"


# --- HTTP call API (token mode) -----------------------------------------------------


def mint(sub: str, *extra: str) -> str:
    out = subprocess.run([relay_binary(), "token", "--secret", SECRET, "--sub", sub, "--name", sub.title(), *extra],
                         check=True, capture_output=True, text=True, timeout=20)
    return out.stdout.strip()


def http(method: str, url: str, token: str | None = None, body: dict | None = None):
    data = json.dumps(body).encode() if body is not None else (b"" if method == "POST" else None)
    req = urllib.request.Request(url, data=data, method=method)
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw.startswith(b"{") else raw


async def token_client(relay, token: str) -> Client:
    c = await Client.connect(relay.ws)
    welcome = await c.hello_token(token)
    assert welcome["type"] == "welcome", welcome
    return c


@pytest.fixture
def token_relay(relay_factory):
    return relay_factory("--secret", SECRET)


async def test_http_call_api(token_relay):
    tokens = {u: mint(u) for u in ("alice", "bob", "carol")}
    alice = await token_client(token_relay, tokens["alice"])
    call, session = await initiate(alice, ["bob"])
    assert await alice.recv() == {"type": "call.offline", "callId": call, "uid": "bob", "pushed": 0}
    base = f"{token_relay.http}/v1/calls/{call}"

    status, body = http("GET", base, tokens["bob"])
    assert status == 200
    assert subset(body, {"callId": call, "sessionId": session, "from": {"uid": "alice", "name": "Alice"},
                         "to": ["bob"], "callType": "video", "state": "ringing", "callees": {"bob": "ringing"}})
    assert isinstance(body["expiresAt"], int)
    assert http("GET", base, tokens["carol"])[0] == 404
    assert http("GET", f"{token_relay.http}/v1/calls/nope", tokens["bob"])[0] == 404
    assert http("POST", base + "/accept", tokens["carol"])[0] == 404
    assert http("POST", base + "/accept", tokens["alice"])[0] == 403

    status, accepted = http("POST", base + "/accept", tokens["bob"])
    assert status == 200 and accepted["state"] == "accepted" and accepted["callees"] == {"bob": "accepted"}
    assert await alice.recv() == {"type": "call.accepted", "callId": call, "uid": "bob", "sessionId": session}
    assert http("POST", base + "/accept", tokens["bob"]) == (200, accepted)  # idempotent
    await nothing(alice, 0.2)
    status, conflict = http("POST", base + "/reject", tokens["bob"], {"reason": "busy"})
    assert status == 409 and conflict["code"] == "conflict" and conflict["type"] == "error"

    # §3: the accepter may join the call's session although its token lists none.
    bob = await token_client(token_relay, tokens["bob"])
    await bob.send({"type": "session.join", "id": "j", "session": session})
    assert (await bob.recv())["type"] == "ok"
    carol = await token_client(token_relay, tokens["carol"])
    await carol.send({"type": "session.join", "id": "j", "session": session})
    assert (await carol.recv())["code"] == "forbidden"


async def test_http_reject_and_cancel_are_idempotent(token_relay):
    tokens = {u: mint(u) for u in ("alice", "bob", "carol")}
    alice = await token_client(token_relay, tokens["alice"])
    bob = await token_client(token_relay, tokens["bob"])
    call, _ = await initiate(alice, ["bob", "carol"])
    await alice.recv(), await alice.recv()
    await bob.recv_type("call.incoming")
    base = f"{token_relay.http}/v1/calls/{call}"
    status, body = http("POST", base + "/reject", tokens["carol"], {"reason": "busy"})
    assert status == 200 and body["callees"] == {"bob": "ringing", "carol": "rejected"}
    assert await alice.recv() == {"type": "call.rejected", "callId": call, "uid": "carol", "reason": "busy"}
    assert http("POST", base + "/reject", tokens["carol"]) == (200, body)
    assert http("POST", base + "/cancel", tokens["bob"])[0] == 403
    status, cancelled = http("POST", base + "/cancel", tokens["alice"])
    assert status == 200 and cancelled["callees"] == {"bob": "cancelled", "carol": "rejected"}
    assert await bob.recv() == {"type": "call.cancelled", "callId": call, "reason": "cancelled"}
    assert http("POST", base + "/cancel", tokens["alice"]) == (200, cancelled)
    status, conflict = http("POST", base + "/accept", tokens["bob"])
    assert status == 409 and conflict["code"] == "conflict"


async def test_http_needs_a_valid_user_token(token_relay, relay_factory):
    alice = await token_client(token_relay, mint("alice"))
    call, _ = await initiate(alice, ["bob"])
    base = f"{token_relay.http}/v1/calls/{call}"
    assert http("GET", base)[0] == 401
    assert http("GET", base, "not-a-token")[0] == 401
    forged = subprocess.run([relay_binary(), "token", "--secret", "other", "--sub", "bob"],
                            check=True, capture_output=True, text=True, timeout=20).stdout.strip()
    assert http("POST", base + "/accept", forged)[0] == 401
    # Dev mode has no secret: no bearer can be valid.
    dev_relay = relay_factory()
    assert http("GET", f"{dev_relay.http}/v1/calls/{call}", "anything")[0] == 401


async def test_call_outcomes_in_metrics(relay):
    alice, bob = await dev(relay, "alice"), await dev(relay, "bob")
    call, _ = await initiate(alice, ["bob"])
    await bob.recv_type("call.incoming")
    await command(bob, "call.reject", call)
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        text = r.read().decode()
    assert 'relay_call_outcomes{outcome="rejected"} 1' in text
    assert "relay_calls_initiated 1" in text
