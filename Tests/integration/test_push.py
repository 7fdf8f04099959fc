"""Push (PROTOCOL.md §9a) end to end: the real relay sends APNs and FCM requests to
faithful local fakes (push_fakes.py) that verify the JWTs, headers and payloads."""
from __future__ import annotations

import asyncio
import json
import time

import pytest

from push_fakes import APNsFake, FCMFake
from relayclient import Client

TOKENS = ["%064x" % (0xA0 + i) for i in range(8)]


@pytest.fixture
def apns(tmp_path):
    fake = APNsFake(tmp_path)
    yield fake
    fake.stop()
    assert not fake.errors, fake.errors


@pytest.fixture
def fcm(tmp_path):
    fake = FCMFake(tmp_path / "fcm")
    yield fake
    fake.stop()
    assert not fake.errors, fake.errors


async def device(relay, uid: str, device_id: str, token: str | None = None, kind: str = "apns-voip",
                 alert: str | None = None, **extra) -> Client:
    """A connection of `uid` from app install `device_id`, its token registered (and an
    APNs alert token beside a VoIP one: follow-ups go there, §9a)."""
    c = await Client.connect(relay.ws)
    await c.send({"type": "hello", "id": "hello", "dev": {"uid": uid, "name": uid.title()}, "device": device_id})
    await c.recv_type("welcome")
    if token:
        await c.send({"type": "push.register", "id": "reg", "token": token, "kind": kind, **extra})
        ok = await c.recv_type("ok")
        assert ok["re"] == "reg", ok
    if alert:
        await c.send({"type": "push.register", "id": "alert", "token": alert, "kind": "apns", **extra})
        assert (await c.recv_type("ok"))["re"] == "alert"
    return c


async def killed(relay, uid: str, device_id: str, token: str, kind: str = "apns-voip", alert: str | None = None,
                 **extra) -> None:
    """A device that registered, then its app was killed (socket closed cleanly)."""
    c = await device(relay, uid, device_id, token, kind, alert, **extra)
    await c.close()


async def call(caller: Client, to: list[str]) -> str:
    await caller.send({"type": "call.initiate", "id": "init", "to": to, "callType": "video", "metadata": {"room": "r1"}})
    ok = await caller.recv_type("ok")
    return ok["callId"]


async def wait_until(predicate, timeout: float = 10.0):
    """Polls a fake's records (written by its own threads) until `predicate()` holds."""
    deadline = time.monotonic() + timeout
    while not (value := predicate()):
        if time.monotonic() > deadline:
            raise TimeoutError("condition not met")
        await asyncio.sleep(0.02)
    return value


async def settle(seconds: float = 0.5) -> None:
    """A bounded negative check's window: nothing more may arrive in it."""
    await asyncio.sleep(seconds)


def metrics(relay) -> str:
    with relay.urlopen(relay.http + "/metrics") as r:
        return r.read().decode()


def metric(relay, name: str, **labels) -> float:
    total = 0.0
    for line in metrics(relay).splitlines():
        if line.startswith(name) and all(f'{k}="{v}"' in line for k, v in labels.items()):
            head = line.split(" ")[0]
            if head == name or head.startswith(name + "{"):
                total += float(line.rsplit(" ", 1)[1])
    return total


# --- APNs: who gets a push ------------------------------------------------------------


async def test_killed_app_gets_one_voip_push_per_device(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    await killed(relay, "bob", "ipad", TOKENS[1], environment="sandbox")
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    offline = await alice.recv_type("call.offline")
    assert offline["uid"] == "bob" and offline["pushed"] == 2, offline
    await wait_until(lambda: len(apns.pushes()) >= 2)
    await settle()
    pushes = apns.pushes()
    assert sorted(p.path for p in pushes) == sorted([f"/3/device/{TOKENS[0]}", f"/sandbox/3/device/{TOKENS[1]}"])
    for p in pushes:
        h = p.headers
        assert h["apns-push-type"] == "voip" and h["apns-topic"] == "com.example.app.voip" and h["apns-priority"] == "10"
        assert h["apns-collapse-id"] == call_id
        relay_obj = p.json()["relay"]
        assert relay_obj["type"] == "call.incoming" and relay_obj["callId"] == call_id
        assert relay_obj["from"] == {"uid": "alice", "name": "Alice"} and relay_obj["metadata"] == {"room": "r1"}
        assert int(h["apns-expiration"]) == relay_obj["expiresAt"] // 1000
        assert relay_obj["sessionId"] and relay_obj["callType"] == "video"
    assert apns.connections == 1 and apns.alpn == ["h2"]  # one long-lived HTTP/2 connection
    assert len(apns.jwts) == 1
    await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="apns", result="sent") == 2)


async def test_foreground_device_not_pushed_background_device_pushed(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    awake = await device(relay, "bob", "phone", TOKENS[0])
    asleep = await device(relay, "bob", "ipad", TOKENS[1])
    await asleep.send({"type": "client.background", "background": True})
    await settle(0.2)
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    ringing = await alice.recv_type("call.ringing")
    assert ringing["pushed"] == 1, ringing
    assert (await awake.recv_type("call.incoming"))["callId"] == call_id  # the awake device rings over its socket
    await wait_until(lambda: apns.pushes())
    await settle()
    assert [p.path for p in apns.pushes()] == [f"/3/device/{TOKENS[1]}"]


async def test_ended_ring_gets_one_missed_call_alert_never_a_second_voip(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0], alert=TOKENS[2])
    await killed(relay, "bob", "old-phone", TOKENS[1], kind="apns")
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    await wait_until(lambda: len(apns.pushes()) >= 2)
    await alice.send({"type": "call.cancel", "id": "c", "callId": call_id})
    await wait_until(lambda: len(apns.pushes()) >= 4)
    await settle()
    voip, alerts = apns.pushes(push_type="voip"), apns.pushes(push_type="alert")
    assert len(voip) == 1 and voip[0].path.endswith(TOKENS[0])
    incoming_alert = [a for a in alerts if a.json()["aps"]["alert"]["loc-key"] == "RELAY_INCOMING_CALL"]
    missed = [a for a in alerts if a.json()["aps"]["alert"]["loc-key"] == "RELAY_MISSED_CALL"]
    assert len(incoming_alert) == 1 and incoming_alert[0].path.endswith(TOKENS[1])
    assert sorted(m.path[-64:] for m in missed) == sorted(TOKENS[1:3])  # the phone's alert token, never its VoIP one
    for m in missed:
        body = m.json()
        assert body["aps"]["alert"]["loc-args"] == ["Alice"]
        assert body["relay"] == {"type": "call.cancelled", "callId": call_id, "reason": "cancelled"}
        assert m.headers["apns-collapse-id"] == call_id and m.headers["apns-topic"] == "com.example.app"
    assert len(apns.pushes()) == 4


async def test_unanswered_gets_missed_call_alert(relay_factory, apns):
    relay = relay_factory(*apns.flags(), "--ring-timeout", "1500")
    await killed(relay, "bob", "phone", TOKENS[0], alert=TOKENS[1])
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    await alice.recv_type("call.unanswered", timeout=10)
    missed = await wait_until(lambda: apns.pushes(push_type="alert"))
    assert missed[0].json()["relay"] == {"type": "call.cancelled", "callId": call_id, "reason": "unanswered"}
    await settle()
    assert len(apns.pushes()) == 2


async def test_answered_elsewhere_sends_no_apns_follow_up(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    desk = await device(relay, "bob", "desk")
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    await desk.recv_type("call.incoming")
    await desk.send({"type": "call.accept", "id": "acc", "callId": call_id})
    await alice.recv_type("call.accepted")
    await wait_until(lambda: apns.pushes())
    await settle()
    assert len(apns.pushes()) == 1 and apns.pushes()[0].headers["apns-push-type"] == "voip"


# --- APNs answers ---------------------------------------------------------------------


async def test_410_removes_the_token_next_call_no_push(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    apns.script.answer(TOKENS[0], ("status", 410, "Unregistered", None))
    alice = await device(relay, "alice", "a1")
    first = await call(alice, ["bob"])
    await wait_until(lambda: apns.pushes())
    await wait_until(lambda: metric(relay, "relay_push_registrations") == 0)
    await alice.send({"type": "call.cancel", "id": "c", "callId": first})
    await alice.recv_type("ok")
    await call(alice, ["bob"])
    offline = await alice.recv_type("call.offline")
    assert offline["pushed"] == 0, offline
    await settle()
    assert len(apns.pushes(push_type="voip")) == 1
    assert metric(relay, "relay_push_sent_total", provider="apns", result="token_gone") == 1


async def test_bad_device_token_removes_the_token(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    await killed(relay, "bob", "tablet", TOKENS[1])
    apns.script.answer(TOKENS[0], ("status", 400, "BadDeviceToken", None))
    alice = await device(relay, "alice", "a1")
    await call(alice, ["bob"])
    await wait_until(lambda: metric(relay, "relay_push_registrations") == 1)


async def test_429_and_500_retried_with_backoff_then_sent(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    apns.script.answer(TOKENS[0], ("status", 429, "TooManyRequests", 1), ("status", 500, "InternalServerError", None))
    alice = await device(relay, "alice", "a1")
    await call(alice, ["bob"])
    pushes = await wait_until(lambda: len(apns.pushes()) >= 3 and apns.pushes())
    assert pushes[1].at - pushes[0].at >= 0.9  # retry-after: 1 honoured
    assert pushes[2].at - pushes[1].at >= 0.2  # backoff keeps half its ceiling (500 ms)
    await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="apns", result="sent") == 1)
    assert metric(relay, "relay_push_sent_total", provider="apns", result="retry") == 2


async def test_retries_stop_at_expires_at(relay_factory, apns):
    relay = relay_factory(*apns.flags(), "--ring-timeout", "2500")
    await killed(relay, "bob", "phone", TOKENS[0])
    apns.script.answer(TOKENS[0], *[("status", 503, "ServiceUnavailable", None)] * 100)
    alice = await device(relay, "alice", "a1")
    await call(alice, ["bob"])
    first = await wait_until(lambda: apns.pushes(push_type="voip"))
    expires_at = first[0].json()["relay"]["expiresAt"] / 1000
    await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="apns", result="expired") == 1, timeout=15)
    voip = apns.pushes(push_type="voip")
    assert len(voip) >= 2  # retried
    sent_wall = [time.time() - (time.monotonic() - p.at) for p in voip]
    assert max(sent_wall) < expires_at + 0.05  # never after expiresAt


async def test_goaway_reconnects_and_delivers(relay_factory, apns):
    relay = relay_factory(*apns.flags())
    await killed(relay, "bob", "phone", TOKENS[0])
    apns.script.answer(TOKENS[0], "goaway")
    alice = await device(relay, "alice", "a1")
    await call(alice, ["bob"])
    await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="apns", result="sent") == 1)
    assert apns.connections == 2


async def test_jwt_reused_then_renewed_after_its_age(relay_factory, apns):
    relay = relay_factory(*apns.flags(), "--apns-token-max-age-ms", "1500")
    for i in range(3):
        await killed(relay, f"u{i}", "phone", TOKENS[i])
    alice = await device(relay, "alice", "a1")
    await call(alice, ["u0"])
    await call(alice, ["u1"])
    await wait_until(lambda: len(apns.pushes()) == 2)
    assert len(apns.jwts) == 1  # reused
    await asyncio.sleep(1.6)  # the token's age is the thing under test
    await call(alice, ["u2"])
    await wait_until(lambda: len(apns.pushes()) == 3)
    assert len(apns.jwts) == 2  # renewed
    assert apns.pushes()[2].headers["authorization"] != apns.pushes()[0].headers["authorization"]


# --- FCM ------------------------------------------------------------------------------


async def test_fcm_ring_and_follow_up_with_cached_oauth_token(relay_factory, fcm):
    relay = relay_factory(*fcm.flags())
    await killed(relay, "bob", "pixel", "fcm-token-1", kind="fcm")
    await killed(relay, "carol", "pixel", "fcm-token-2", kind="fcm")
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob", "carol"])
    sends = await wait_until(lambda: len(fcm.sends()) >= 2 and fcm.sends())
    message = sends[0].json()["message"]
    data = message["data"]
    assert data["type"] == "call.incoming" and data["callId"] == call_id and data["callType"] == "video"
    assert json.loads(data["from"]) == {"uid": "alice", "name": "Alice"} and json.loads(data["metadata"]) == {"room": "r1"}
    assert int(data["expiresAt"]) > 0 and message["android"]["priority"] == "HIGH"
    assert 0 < int(message["android"]["ttl"][:-1]) <= 45
    await alice.send({"type": "call.cancel", "id": "c", "callId": call_id})
    ended = await wait_until(lambda: len(fcm.sends()) >= 4 and fcm.sends()[2:])
    assert sorted(e.json()["message"]["token"] for e in ended) == ["fcm-token-1", "fcm-token-2"]
    assert all(e.json()["message"]["data"] == {"type": "call.cancelled", "callId": call_id, "reason": "cancelled"} for e in ended)
    assert fcm.token_requests == 1  # one OAuth token for every send


async def test_fcm_answered_elsewhere_follow_up_and_unregistered(relay_factory, fcm):
    relay = relay_factory(*fcm.flags())
    await killed(relay, "bob", "pixel", "fcm-token-1", kind="fcm")
    desk = await device(relay, "bob", "desk")
    alice = await device(relay, "alice", "a1")
    call_id = await call(alice, ["bob"])
    await wait_until(lambda: fcm.sends())
    await desk.recv_type("call.incoming")
    await desk.send({"type": "call.accept", "id": "acc", "callId": call_id})
    follow = await wait_until(lambda: fcm.sends()[1:])
    assert follow[0].json()["message"]["data"]["reason"] == "answered_elsewhere"
    await desk.send({"type": "call.end", "id": "end", "callId": call_id})
    await alice.recv_type("call.ended")
    fcm.script.answer("fcm-token-1", ("status", 404, "UNREGISTERED", None))
    await call(alice, ["bob"])
    await wait_until(lambda: metric(relay, "relay_push_registrations") == 0)


async def test_fcm_503_retried_and_token_refetched_after_expiry(relay_factory, tmp_path):
    fcm = FCMFake(tmp_path / "fcm", expires_in=2)
    try:
        relay = relay_factory(*fcm.flags())
        await killed(relay, "bob", "pixel", "fcm-token-1", kind="fcm")
        fcm.script.answer("fcm-token-1", ("status", 503, "UNAVAILABLE", None))
        alice = await device(relay, "alice", "a1")
        await call(alice, ["bob"])
        await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="fcm", result="sent") == 1)
        assert len(fcm.sends()) == 2
        await asyncio.sleep(2.1)  # the access token's lifetime is the thing under test
        await killed(relay, "carol", "pixel", "fcm-token-2", kind="fcm")
        await call(alice, ["carol"])
        await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="fcm", result="sent") == 2)
        assert fcm.token_requests == 2
        assert not fcm.errors, fcm.errors
    finally:
        fcm.stop()


# --- a provider that never answers ------------------------------------------------------


def rss_kib(relay) -> int:
    with open(f"/proc/{relay.proc.pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


async def test_black_holed_provider_slows_nothing(relay_factory, apns):
    """Every push goes into a black hole (the stream is never answered): the relay's
    turns stay short, a canary pair's round trips stay fast, memory stays bounded, and
    the jobs end at the ring's expiry."""
    from abuse_util import turns_longer_than

    apns.script.default = "blackhole"
    relay = relay_factory(*apns.flags(), "--ring-timeout", "6000", "--ring-rate", "0")
    callees = [f"u{i}" for i in range(320)]
    await asyncio.gather(*(killed(relay, uid, "phone", "%064x" % (0x1000 + i)) for i, uid in enumerate(callees)))
    ping, pong = await device(relay, "canary1", "k1"), await device(relay, "canary2", "k2")
    for c in (ping, pong):
        await c.send({"type": "session.join", "id": "j", "session": "canaries"})
        await c.recv_type("ok")
    rss_before, turns_before = rss_kib(relay), turns_longer_than(relay, "0.25")
    callers = [await device(relay, f"caller{i}", f"c{i}") for i in range(10)]
    await asyncio.gather(*(call(c, callees[i * 32:(i + 1) * 32]) for i, c in enumerate(callers)))
    await wait_until(lambda: len(apns.pushes()) >= 100)  # the fake's concurrent-stream bound holds the rest
    worst = 0.0
    for i in range(20):
        started = time.monotonic()
        await ping.send({"type": "message.send", "id": f"m{i}", "session": "canaries", "data": {"i": i}})
        got = await pong.recv_type("message")
        assert got["data"] == {"i": i}
        worst = max(worst, time.monotonic() - started)
        await asyncio.sleep(0.05)
    assert worst < 0.5, f"canary round trip {worst:.3f} s while the provider is black-holed"
    await wait_until(lambda: metric(relay, "relay_push_sent_total", provider="apns", result="expired") == 320, timeout=30)
    assert metric(relay, "relay_push_queued") <= 320  # only the missed-call alerts, themselves bounded by a window
    assert turns_longer_than(relay, "0.25") - turns_before == 0
    assert rss_kib(relay) - rss_before < 64 * 1024


# --- settings that cannot work ----------------------------------------------------------


def bad_settings(tmp_path) -> list[tuple[list[str], str]]:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa

    p8 = tmp_path / "AuthKey.p8"
    p8.write_bytes(ec.generate_private_key(ec.SECP256R1()).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    rsa_pem = rsa.generate_private_key(public_exponent=65537, key_size=2048).private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    rsa_key = tmp_path / "rsa.pem"
    rsa_key.write_bytes(rsa_pem)
    good = {"project_id": "p", "client_email": "e@p", "private_key": rsa_pem.decode(), "token_uri": "https://oauth2.example/token"}

    def creds(name: str, content) -> str:
        path = tmp_path / name
        path.write_text(content if isinstance(content, str) else json.dumps(content))
        return str(path)

    apns = ["--apns-key-id", "K", "--apns-team-id", "T", "--apns-topic", "com.example.app"]
    return [
        (["--apns-key-file", str(tmp_path / "missing.p8"), *apns], "--apns-key-file"),
        (["--apns-key-file", str(rsa_key), *apns], "--apns-key-file"),
        (["--apns-key-file", creds("garbage.p8", "not a key"), *apns], "--apns-key-file"),
        (["--apns-key-file", str(p8), "--apns-team-id", "T", "--apns-topic", "t"], "--apns-key-id"),
        (["--apns-key-file", str(p8), "--apns-key-id", "K", "--apns-team-id", "T"], "--apns-topic"),
        (["--apns-topic", "com.example.app"], "--apns-key-file"),
        (["--apns-key-file", str(p8), *apns, "--apns-url", "ftp://apns.example"], "--apns-url"),
        (["--fcm-credentials", creds("broken.json", "{not json")], "--fcm-credentials"),
        (["--fcm-credentials", creds("nokey.json", {**good, "private_key": None})], "private_key"),
        (["--fcm-credentials", creds("ec.json", {**good, "private_key": p8.read_text()})], "private_key"),
        (["--fcm-credentials", creds("uri.json", {**good, "token_uri": "oauth2"})], "token_uri"),
        (["--fcm-credentials", creds("good.json", good), "--fcm-url", "fcm.googleapis.com"], "--fcm-url"),
    ]


def test_push_settings_that_cannot_work_exit_64(tmp_path):
    import subprocess

    from conftest import free_port, relay_binary

    for flags, says in bad_settings(tmp_path):
        proc = subprocess.run([relay_binary(), "serve", "--listen", f"127.0.0.1:{free_port()}", *flags],
                              capture_output=True, text=True, timeout=20)
        assert proc.returncode == 64, (flags, proc.stdout + proc.stderr)
        assert says in proc.stdout + proc.stderr, (flags, proc.stdout + proc.stderr)
