"""Bounded identities and representable numbers (protocol/PROTOCOL.md §3, §7, §16):
`name` and `avatar` are capped for `hello.dev` and token claims alike, JWT times
outside a sane range are refused rather than read as "never expires", and numbers no
JSON client can represent (`1e400`) are refused in `data`."""
from __future__ import annotations

import hashlib
import hmac
import json
import time

import pytest

from relayclient import Client, b64url, claims, make_jwt

SECRET = "abuse-secret"


def make_jwt_raw(payload_json: str) -> str:
    """A signed token whose claims are written verbatim (numbers Python would not emit)."""
    header = b64url(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
    payload = b64url(payload_json.encode())
    signing_input = f"{header}.{payload}".encode()
    sig = hmac.new(SECRET.encode(), signing_input, hashlib.sha256).digest()
    return f"{header}.{payload}.{b64url(sig)}"


async def refused_bad_request(c: Client, hello: dict) -> str:
    await c.send(hello)
    reply = await c.recv()
    assert reply["type"] == "error", reply
    assert reply["code"] == "bad_request", reply
    assert reply.get("re") == "h"
    assert await c.expect_close() == 4501
    return reply["message"]


@pytest.mark.parametrize("field,size", [("name", 65_000), ("name", 257), ("avatar", 1025)])
async def test_oversized_dev_identity_is_refused(relay, field, size):
    dev = {"uid": "mallory", "name": "Mallory"}
    dev[field] = "n" * size
    c = await Client.connect(relay.ws)
    message = await refused_bad_request(c, {"type": "hello", "id": "h", "dev": dev})
    assert field in message and ("256" in message or "1024" in message)


async def test_identity_at_the_bounds_is_accepted(relay):
    c = await Client.connect(relay.ws)
    dev = {"uid": "ok", "name": "é" * 128, "avatar": "a" * 1024}  # 256 UTF-8 bytes
    await c.send({"type": "hello", "id": "h", "dev": dev})
    w = await c.recv_type("welcome")
    assert w["user"]["name"] == "é" * 128
    await c.close()


async def test_bounds_follow_their_flags(relay_factory):
    r = relay_factory("--max-name-bytes", "8", env={"RELAY_MAX_AVATAR_BYTES": "4"})
    c = await Client.connect(r.ws)
    await refused_bad_request(c, {"type": "hello", "id": "h", "dev": {"uid": "u", "name": "123456789"}})
    c = await Client.connect(r.ws)
    await refused_bad_request(c, {"type": "hello", "id": "h", "dev": {"uid": "u", "name": "n", "avatar": "12345"}})


@pytest.mark.parametrize("field,size", [("name", 48_000), ("avatar", 1025)])
async def test_oversized_token_identity_is_refused(relay_factory, field, size):
    r = relay_factory("--secret", SECRET)
    c = await Client.connect(r.ws)
    token = make_jwt(SECRET, claims(**{field: "x" * size}))
    await refused_bad_request(c, {"type": "hello", "id": "h", "token": token})


@pytest.mark.parametrize(
    "exp",
    ["1e30", "9223372036854775808", "1e400", "253402300800", "1767225600000", "-1", "9007199254740993.5"],
)
async def test_token_times_out_of_range_are_refused(relay_factory, exp):
    """An exp beyond 9999-12-31 (milliseconds written as seconds, 2^63, 1e30) is not
    "never expires"; each is refused like a bad token."""
    r = relay_factory("--secret", SECRET)
    c = await Client.connect(r.ws)
    await c.send({"type": "hello", "id": "h", "token": make_jwt_raw(f'{{"sub":"alice","exp":{exp}}}')})
    reply = await c.recv()
    assert reply["type"] == "error" and reply["code"] == "unauthorized", reply
    assert await c.expect_close() == 4501


@pytest.mark.parametrize("claim", ["nbf", "iat"])
async def test_nbf_and_iat_out_of_range_are_refused(relay_factory, claim):
    r = relay_factory("--secret", SECRET)
    c = await Client.connect(r.ws)
    exp = int(time.time()) + 60
    await c.send({"type": "hello", "id": "h", "token": make_jwt_raw(f'{{"sub":"a","exp":{exp},"{claim}":1e30}}')})
    assert await c.expect_close() == 4501


async def test_token_with_sane_times_still_works(relay_factory):
    r = relay_factory("--secret", SECRET)
    c = await Client.connect(r.ws)
    now = int(time.time())
    w = await c.hello_token(make_jwt(SECRET, claims(iat=now, nbf=now - 5)))
    assert w["type"] == "welcome", w
    await c.close()


@pytest.mark.parametrize("number", ["1e400", "-1e400", "[1,{\"a\":2e308}]", "1" + "0" * 400])
async def test_unrepresentable_numbers_in_data_are_refused(relay, number):
    c = await Client.connect(relay.ws)
    await c.hello_dev("alice")
    await c.send({"type": "session.join", "id": "j", "session": "s"})
    await c.recv_type("session.joined")
    await c.send('{"type":"message.send","id":"m","session":"s","data":' + number + "}")
    reply = await c.recv_type("error")
    assert reply["code"] == "bad_request" and reply["re"] == "m", reply
    # Numbers a double holds (large, tiny, many digits) still go through as written.
    await c.send('{"type":"message.send","id":"ok","session":"s","data":[1e308,1e-400,123456789012345678901234567890]}')
    assert (await c.recv_type("ok"))["re"] == "ok"
    await c.close()
