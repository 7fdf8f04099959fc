"""Calls and push registrations across a restart of a durable single node (contract
§12a): a ringing call still rings the callee who connects after the restart, or, if
its ring timeout passed while the relay was down, has ended at start with its
outcome; a finished call still answers an idempotent HTTP action the same way; push
registrations are still there."""
from __future__ import annotations

import json
import time
import urllib.error
import urllib.request

import pytest

from durable import DurableRelay
from relayclient import Client, claims, make_jwt

SECRET = "durable-secret"
FLAGS = ["--secret", SECRET, "--heartbeat-interval", "1000", "--heartbeat-timeout", "4000", "--grace", "20000"]


def token(uid: str) -> str:
    return make_jwt(SECRET, claims(uid))


def http(relay, method: str, path: str, uid: str, body: dict | None = None):
    req = urllib.request.Request(relay.http + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    req.add_header("Authorization", "Bearer " + token(uid))
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            raw = r.read()
            return r.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


async def user(relay, uid: str) -> Client:
    c = await Client.connect(relay.ws)
    welcome = await c.hello_token(token(uid))
    assert welcome["type"] == "welcome", welcome
    return c


async def call(caller: Client, to: str) -> str:
    await caller.send({"type": "call.initiate", "id": "i", "to": [to], "callType": "audio"})
    ok = await caller.recv_type("ok")
    return ok["callId"]


@pytest.mark.parametrize("how", ["kill", "term"])
async def test_a_ringing_call_still_rings_after_a_restart(tmp_path, how):
    relay = DurableRelay(tmp_path / "data", *FLAGS, "--ring-timeout", "60000")
    alice = await user(relay, "alice")
    call_id = await call(alice, "bob")
    assert (await alice.recv_type("call.offline"))["uid"] == "bob"
    relay.kill() if how == "kill" else relay.terminate()
    relay = DurableRelay(relay.data_dir, *FLAGS, "--ring-timeout", "60000")
    # §4.2: right after `welcome`, the call still ringing this user.
    bob = await Client.connect(relay.ws)
    await bob.send({"type": "hello", "id": "h", "token": token("bob")})
    assert (await bob.recv())["type"] == "welcome"
    incoming = await bob.recv()
    assert incoming["type"] == "call.incoming" and incoming["callId"] == call_id, incoming
    status, body = http(relay, "POST", f"/v1/calls/{call_id}/accept", "bob")
    assert status == 200 and body["state"] == "accepted", body
    relay.terminate()


async def test_a_call_whose_ring_timed_out_while_down_has_ended_at_start(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS, "--ring-timeout", "1500")
    alice = await user(relay, "alice")
    call_id = await call(alice, "bob")
    await alice.recv_type("call.offline")
    relay.kill()
    time.sleep(2.0)  # the time spent down is what is tested: it must pass the ring timeout
    relay = DurableRelay(relay.data_dir, *FLAGS, "--ring-timeout", "1500")
    status, body = http(relay, "GET", f"/v1/calls/{call_id}", "alice")
    assert status == 200 and body["callees"] == {"bob": "unanswered"}, body
    bob = await user(relay, "bob")
    await bob.send({"type": "call.accept", "id": "late", "callId": call_id})
    answer = await bob.recv_type("error")
    assert answer["code"] == "conflict", answer
    relay.terminate()


async def test_a_finished_call_answers_an_idempotent_action_after_a_restart(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    alice = await user(relay, "alice")
    call_id = await call(alice, "bob")
    status, accepted = http(relay, "POST", f"/v1/calls/{call_id}/accept", "bob")
    assert status == 200 and accepted["state"] == "accepted", accepted
    relay.kill()
    relay = DurableRelay(relay.data_dir, *FLAGS)
    assert http(relay, "POST", f"/v1/calls/{call_id}/accept", "bob") == (200, accepted)
    assert http(relay, "POST", f"/v1/calls/{call_id}/reject", "bob")[0] == 409
    relay.terminate()


async def test_push_registrations_survive_a_restart(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    assert http(relay, "PUT", "/v1/push/devices/tablet", "bob", {"token": "fcm-1", "kind": "fcm"}) == (204, None)
    assert http(relay, "PUT", "/v1/push/devices/phone", "carol", {"token": "fcm-2", "kind": "fcm"}) == (204, None)
    assert relay.metric("relay_push_registrations") == 2
    relay.kill()
    relay = DurableRelay(relay.data_dir, *FLAGS)
    assert relay.metric("relay_push_registrations") == 2
    assert http(relay, "DELETE", "/v1/push/devices/tablet", "bob") == (204, None)
    assert relay.metric("relay_push_registrations") == 1
    relay.terminate()
