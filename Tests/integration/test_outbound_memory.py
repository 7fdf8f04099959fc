"""Memory of the whole process: a budget for the bytes queued to all connections
(contract §1), the biggest holders closed 4008 first, and freed memory given back to
the system after a burst (RSS returns near its baseline)."""
from __future__ import annotations

import asyncio
import os
import re
import time
import urllib.request

import pytest
import wsraw
from relayclient import Client
from wsraw import OP_BINARY, OP_TEXT, build_frame

FRAME = build_frame(OP_BINARY, os.urandom(65536))


def metric(relay, name: str) -> float:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        m = re.search(rf"^{name} ([0-9.e+]+)$", r.read().decode(), re.M)
    assert m, name
    return float(m.group(1))


def rss_bytes(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^VmRSS:\s+(\d+) kB", f.read(), re.M).group(1)) * 1024


def non_readers(relay, count: int, frames: int) -> list[wsraw.RawClient]:
    """`count` clients that each send `frames` 64 KiB messages to echo and read nothing."""
    clients = [wsraw.connect(relay.port, rcvbuf=4096, timeout=60) for _ in range(count)]
    for _ in range(frames):
        for c in clients:
            c.sock.sendall(FRAME)
    return clients


def served(relay) -> None:
    c = wsraw.connect(relay.port)
    with c:
        c.send_text("canary")
        assert c.recv_message(timeout=5) == (OP_TEXT, b"canary")


def served_ws(relay) -> None:
    with urllib.request.urlopen(relay.http + "/healthz", timeout=5) as r:
        assert r.status == 200


def test_budget_closes_the_biggest_holders_first(relay_factory):
    # The per-connection cap is out of the way; the kernel takes up to 4 MiB per
    # socket (tcp_wmem) before the relay queues anything, so the big ones send more.
    relay = relay_factory("--echo", "--max-outbound-bytes", "67108864", "--outbound-budget-bytes", "4000000")
    small = non_readers(relay, 2, 2)
    big = non_readers(relay, 3, 100)  # 6.5 MB each: about 2.5 MB queued each
    deadline = time.monotonic() + 20
    while metric(relay, "relay_outbound_budget_closes_total") == 0 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert metric(relay, "relay_outbound_budget_closes_total") >= 1
    assert metric(relay, "relay_outbound_queued_bytes") <= 4000000
    assert metric(relay, "relay_outbound_budget_bytes") == 4000000
    for c in small:  # the small holders were left alone
        assert not c.is_closed_within(0.05)
    served(relay)
    for c in small + big:
        c.close()


async def test_rss_returns_near_baseline_after_a_burst(relay_factory):
    """100 sessions each fill their 1 MiB replay log with 8 KB messages (100 MB of
    heap), then everyone leaves: the logs are freed and the relay gives the memory
    back, so RSS ends near where it started."""
    if os.environ.get("RELAY_SANITIZER"):
        pytest.skip("a sanitizer's allocator keeps freed memory in quarantine: glibc's trim is not in play")
    relay = relay_factory("--message-rate", "1000")
    served_ws(relay)
    baseline = rss_bytes(relay.proc.pid)
    data = "x" * 8000

    async def fill(n: int) -> Client:
        c = await Client.connect(relay.ws)
        await c.hello_dev(f"u{n}")
        for k in range(4):
            await c.send({"type": "session.join", "session": f"s{n}-{k}"})
            await c.recv_type("session.joined")
        for _ in range(130):
            for k in range(4):
                await c.send({"type": "message.send", "session": f"s{n}-{k}", "data": data})
            for k in range(4):
                await c.recv_type("message")
        return c

    clients = await asyncio.gather(*(fill(n) for n in range(25)))
    held = metric(relay, "relay_replay_bytes")
    peak = rss_bytes(relay.proc.pid)
    assert held > 90e6 and peak > baseline + 80e6, (held, baseline, peak)
    for c in clients:
        await c.close()
    # Generous and untimed: the sweep trims within seconds; allow 30.
    deadline = time.monotonic() + 30
    while rss_bytes(relay.proc.pid) > baseline + 24e6 and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
    after = rss_bytes(relay.proc.pid)
    print(f"RSS baseline {baseline / 1e6:.1f} MB, peak {peak / 1e6:.1f} MB, after {after / 1e6:.1f} MB")
    assert metric(relay, "relay_replay_bytes") == 0
    # Whether glibc gave the pages back by itself (a freed heap top) or the relay's
    # trim did (pages inside the heap) varies from run to run; RSS is what counts.
    assert after <= baseline + 24e6, (baseline, peak, after)
