"""protocol/ §16: a fan-out flood to members of a big session that read nothing does
not starve a client of another session: reads, writes and fan-out are budgeted per
loop turn (RelayServer+Turns.swift, Loop.flushBudgetNs). Generous bounds only: the
exact figures are the join-storm row of `make bench-abuse`."""
from __future__ import annotations

import asyncio
import os
import time
import urllib.request

from abuse_util import rejoin, silent_member
from relayclient import Client

MEMBERS = int(os.environ.get("FAIRNESS_MEMBERS", "600"))


def open_members(port: int) -> list:
    return [silent_member(port, f"m{i}", "big") for i in range(MEMBERS)]


def probe(url: str) -> float:
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
    return time.monotonic() - t


async def test_canary_and_metrics_stay_responsive_during_a_fan_out_flood(relay_factory):
    relay = relay_factory("--heartbeat-interval", "0", "--heartbeat-timeout", "0", "--session-join-rate", "0")
    canary = await Client.connect(relay.ws)
    await canary.hello_dev("canary")
    await canary.send({"type": "session.join", "session": "calm"})
    await canary.recv_type("session.joined")
    members = await asyncio.to_thread(open_members, relay.port)
    try:
        # Every member leaves and re-joins at once: 2 × MEMBERS events, each to up to
        # MEMBERS sockets whose kernel buffers fill, while the canary keeps talking.
        flood = asyncio.create_task(asyncio.to_thread(rejoin, members, lambda i: "big"))
        latencies, probes = [], []
        for n in range(40):
            t = time.monotonic()
            await canary.send({"type": "message.send", "id": f"m{n}", "session": "calm", "data": n})
            while (reply := await canary.recv(timeout=30)).get("re") != f"m{n}":
                pass
            assert reply["type"] == "ok", reply
            latencies.append(time.monotonic() - t)
            if n % 8 == 0:
                probes.append(await asyncio.to_thread(probe, relay.http + "/metrics"))
                probes.append(await asyncio.to_thread(probe, relay.http + "/readyz"))
            await asyncio.sleep(0.05)
        await flood
        latencies.sort()
        assert latencies[int(0.99 * len(latencies))] < 1.0, latencies
        assert max(probes) < 2.0, probes
    finally:
        for s in members:
            s.close()
