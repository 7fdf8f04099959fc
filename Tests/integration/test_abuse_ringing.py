"""protocol/PROTOCOL.md §10.1 `--ring-rate`: many callers together cannot flood one
callee. Each caller stays within its own initiate rate; past the callee's budget
their calls are refused `rate_limited` and the callee is not rung."""
from __future__ import annotations

import asyncio
import re
import urllib.request

from relayclient import Client

CALLERS = 200


def metric(relay, name: str) -> float:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        text = r.read().decode()
    return sum(float(v) for v in re.findall(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M))


async def ring_once(relay, i: int) -> str:
    c = await Client.connect(relay.ws)
    await c.hello_dev(f"caller{i}")
    await c.send({"type": "call.initiate", "id": "i", "to": ["target"], "callType": "audio"})
    while True:
        m = await c.recv(timeout=20)
        if m.get("re") == "i":
            break
    await c.close()
    return "ok" if m["type"] == "ok" else m["code"]


async def test_two_hundred_callers_ring_one_user_within_its_budget(relay_factory):
    r = relay_factory("--heartbeat-interval", "0")
    target = await Client.connect(r.ws)
    await target.hello_dev("target")
    outcomes = []
    for batch in range(0, CALLERS, 50):
        outcomes += await asyncio.gather(*(ring_once(r, i) for i in range(batch, batch + 50)))
    assert outcomes.count("ok") == 10, outcomes  # --ring-rate 10 per 60 000 ms
    assert outcomes.count("rate_limited") == CALLERS - 10
    # The target was rung exactly ten times: its ping answer comes after every
    # call.incoming the relay sent it (one connection's messages are ordered).
    await target.send({"type": "ping", "id": "last"})
    incoming = 0
    while True:
        m = await target.recv()
        if m["type"] == "pong":
            break
        incoming += m["type"] == "call.incoming"
    assert incoming == 10
    assert metric(r, "relay_errors_total") >= CALLERS - 10
    await target.close()


async def test_ring_rate_flag_and_zero_means_no_bound(relay_factory):
    r = relay_factory(env={"RELAY_RING_RATE": "2"})
    got = [await ring_once(r, i) for i in range(4)]
    assert got == ["ok", "ok", "rate_limited", "rate_limited"]
    r = relay_factory("--ring-rate", "0")
    got = [await ring_once(r, i) for i in range(12)]
    assert got == ["ok"] * 12
