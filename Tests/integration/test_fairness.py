"""protocol/ §16: a fan-out flood to members of a big session that read nothing does
not starve a client of another session: reads, writes and fan-out are budgeted per
loop turn (RelayServer+Turns.swift, Loop.flushBudgetNs). Generous bounds only: the
exact figures are the join-storm row of `make bench-abuse`."""
from __future__ import annotations

import asyncio
import os
import time
import urllib.request

from abuse_util import metric, rejoin, silent_member
from relayclient import Client

MEMBERS = int(os.environ.get("FAIRNESS_MEMBERS", "600"))


def open_members(port: int) -> list:
    return [silent_member(port, f"m{i}", "big") for i in range(MEMBERS)]


def probe(url: str) -> float:
    t = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as r:
        r.read()
    return time.monotonic() - t


async def canary_and_big_room(relay_factory):
    """A relay, a canary in session "calm", and MEMBERS silent members of "big"."""
    relay = relay_factory("--heartbeat-interval", "0", "--heartbeat-timeout", "0", "--session-join-rate", "0")
    canary = await Client.connect(relay.ws)
    await canary.hello_dev("canary")
    await canary.send({"type": "session.join", "session": "calm"})
    await canary.recv_type("session.joined")
    return relay, canary, await asyncio.to_thread(open_members, relay.port)


async def test_canary_and_metrics_stay_responsive_during_a_fan_out_flood(relay_factory):
    relay, canary, members = await canary_and_big_room(relay_factory)
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


JOINS = 'relay_commands_total{type="session.join"}'


async def test_a_client_of_another_session_is_served_beside_a_flood_not_behind_it(relay_factory):
    """Order, not time: while every member of a big room re-joins at once (their reads
    kept for later turns), a client of another session that speaks is answered after
    a few of those joins, not after the rest of them (ReadLanes: light and heavy
    reads share the loop's time)."""
    relay, canary, members = await canary_and_big_room(relay_factory)
    all_joins = 2 * MEMBERS + 1
    try:
        flood = asyncio.create_task(asyncio.to_thread(rejoin, members, lambda i: "big"))
        joined_while_waiting = []
        for n in range(20):
            before = await asyncio.to_thread(metric, relay, JOINS)
            if before >= all_joins:
                break
            await canary.send({"type": "message.send", "id": f"m{n}", "session": "calm", "data": n})
            while (reply := await canary.recv(timeout=30)).get("re") != f"m{n}":
                pass
            assert reply["type"] == "ok", reply
            joined_while_waiting.append(await asyncio.to_thread(metric, relay, JOINS) - before)
        await flood
        assert joined_while_waiting, "the flood was over before the canary spoke"
        # Behind the flood, the first answer comes after all of it (MEMBERS joins);
        # beside it, after the few turns the canary's read waits, plus the /metrics
        # round trip: a fraction of the flood even in a release build.
        assert max(joined_while_waiting) <= MEMBERS // 2, joined_while_waiting
    finally:
        for s in members:
            s.close()
