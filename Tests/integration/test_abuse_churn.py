"""protocol/PROTOCOL.md §5.2 `--session-join-rate`: many connections, each within its
own `--join-rate`, together churning join/leave into one session. The session's
budget bounds the `participant.*` events every member must read; joins past it get
`rate_limited` and nobody loses a connection."""
from __future__ import annotations

import asyncio

from relayclient import Client

CHURNERS = 50
PAIRS = 10  # 20 joins and leaves each: exactly --join-rate (20 per 10 000 ms)
READERS = 20


async def churn(relay, i: int) -> tuple[int, int, Client]:
    c = await Client.connect(relay.ws)
    await c.hello_dev(f"churner{i}", name="c" * 200)
    joined = limited = 0
    for k in range(PAIRS):
        await c.send({"type": "session.join", "id": f"j{k}", "session": "big"})
        while True:
            m = await c.recv(timeout=20)
            if m.get("re") == f"j{k}":
                break
        if m["type"] == "error":
            assert m["code"] == "rate_limited", m
            limited += 1
            continue
        joined += 1
        await c.send({"type": "session.leave", "id": f"l{k}", "session": "big"})
        while (await c.recv(timeout=20)).get("re") != f"l{k}":
            pass
    return joined, limited, c


async def test_fifty_churners_stay_within_the_session_budget(relay_factory):
    r = relay_factory("--session-join-rate", "200", "--heartbeat-interval", "0")
    readers = []
    for i in range(READERS):
        c = await Client.connect(r.ws)
        await c.hello_dev(f"reader{i}")
        await c.send({"type": "session.join", "session": "big"})
        await c.recv_type("session.joined")
        readers.append(c)
    results = await asyncio.gather(*(churn(r, i) for i in range(CHURNERS)))
    joined = sum(j for j, _, _ in results)
    limited = sum(n for _, n, _ in results)
    # The readers' 20 joins counted too; leaves count but are never refused.
    assert joined <= 200 - READERS, joined
    assert limited == CHURNERS * PAIRS - joined
    # Every churner still has its connection.
    for _, _, c in results:
        await c.send({"type": "ping", "id": "alive"})
        assert (await c.recv_type("pong"))["re"] == "alive"
    # Every reader is still connected and saw exactly the accepted churn, in order.
    for reader in readers:
        await reader.send({"type": "ping", "id": "end"})
        joins = 0
        while True:
            m = await reader.recv()
            if m["type"] == "pong":
                break
            joins += m["type"] == "participant.joined"
        assert joins >= joined - READERS  # a reader sees the joins after its own
        assert joins <= joined + READERS
    for c in readers + [c for _, _, c in results]:
        await c.close()


async def test_session_join_rate_zero_means_no_bound(relay_factory):
    r = relay_factory("--session-join-rate", "0", "--heartbeat-interval", "0")
    results = await asyncio.gather(*(churn(r, i) for i in range(10)))
    assert sum(n for _, n, _ in results) == 0
    for _, _, c in results:
        await c.close()
