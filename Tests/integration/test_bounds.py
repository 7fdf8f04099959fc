"""Memory bounds of the real binary, read from /metrics: replay bytes per session and
for all sessions (§9), finished calls kept for idempotent call actions (§11), and the
join/leave rate (§5.2)."""
from __future__ import annotations

import asyncio
import re
import urllib.request

from relayclient import Client


def metric(relay, name: str) -> float:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        text = r.read().decode()
    m = re.search(rf"^{name}(?:{{[^}}]*}})? ([0-9.e+]+)$", text, re.M)
    assert m, name
    return float(m.group(1))


async def heap_in_use(relay) -> float:
    """`relay_heap_in_use_bytes` sampled after this call: the relay samples the heap
    off its loop every 2 s (`heapTrimIntervalMs`), so wait (bounded) until two more
    samples finished — the first may have been under way already."""
    wanted = metric(relay, "relay_heap_samples_total") + 2
    for _ in range(200):
        if metric(relay, "relay_heap_samples_total") >= wanted:
            return metric(relay, "relay_heap_in_use_bytes")
        await asyncio.sleep(0.05)
    raise AssertionError("no fresh heap sample within 10 s")


async def test_replay_bytes_are_bounded_per_session_and_in_all(relay_factory):
    r = relay_factory("--replay-bytes", "100000", "--replay-budget-bytes", "250000", "--message-rate", "1000")
    data = "x" * 8000
    clients = []
    for i in range(4):
        c = await Client.connect(r.ws)
        await c.hello_dev(f"u{i}")
        await c.send({"type": "session.join", "session": f"s{i}"})
        await c.recv_type("session.joined")
        clients.append(c)
    for c_index, c in enumerate(clients):
        for _ in range(20):
            await c.send({"type": "message.send", "session": f"s{c_index}", "data": data})
        for _ in range(20):
            await c.recv_type("message")
    held = metric(r, "relay_replay_bytes")
    assert 0 < held <= 250000
    assert metric(r, "relay_replay_budget_bytes") == 250000
    # 4 × 20 × 8 KB were sent: each session kept at most 100 000, all at most 250 000.
    assert metric(r, "relay_replay_evicted_total") >= 80 - 250000 // 8000
    for c in clients:
        await c.close()


async def test_finished_calls_are_bounded_and_the_heap_returns(relay_factory):
    """300 calls with 4 KB of metadata each, cancelled at once: with 64 KiB for
    finished calls, the heap ends near where it started (unbounded, it holds them all
    for 300 s: several MB)."""
    r = relay_factory("--max-ended-call-bytes", "65536", "--heartbeat-interval", "0", "--ring-rate", "0")
    callee = await Client.connect(r.ws)
    await callee.hello_dev("bob")
    callers = []
    for i in range(30):
        c = await Client.connect(r.ws)
        await c.hello_dev(f"caller{i}")
        callers.append(c)
    baseline = await heap_in_use(r)
    meta = {"note": "m" * 4000}

    async def ring(c: Client):
        for k in range(10):  # the §10.1 initiate rate: 10 per user per 60 s
            await c.send({"type": "call.initiate", "id": f"i{k}", "to": ["bob"], "callType": "audio", "metadata": meta})
            ok = await c.recv_type("ok")
            await c.send({"type": "call.cancel", "callId": ok["callId"]})

    await asyncio.gather(*(ring(c) for c in callers))
    # Every cancel is processed once the callee saw all 300 cancellations.
    seen = 0
    while seen < 300:
        if (await callee.recv())["type"] == "call.cancelled":
            seen += 1
    assert metric(r, "relay_calls_finished_bytes") <= 65536
    assert metric(r, "relay_calls_finished_evicted_total") > 250
    grown = await heap_in_use(r) - baseline
    assert grown < 1_000_000, grown
    for c in callers + [callee]:
        await c.close()


async def test_join_flood_is_rate_limited_and_a_canary_is_served(relay_factory):
    r = relay_factory()
    canary = await Client.connect(r.ws)
    await canary.hello_dev("canary")
    await canary.send({"type": "session.join", "session": "quiet"})
    await canary.recv_type("session.joined")
    attacker = await Client.connect(r.ws)
    await attacker.hello_dev("attacker")
    for i in range(60):
        await attacker.send({"type": "session.join", "id": str(i), "session": "busy"})
    limited = 0
    for _ in range(60):
        m = await attacker.recv()
        while m["type"] == "session.joined":
            m = await attacker.recv()
        if m["type"] == "error":
            assert m["code"] == "rate_limited"
            limited += 1
    assert limited == 40  # --join-rate 20 per 10 000 ms
    await canary.send({"type": "message.send", "id": "m", "session": "quiet", "data": 1})
    assert (await canary.recv_type("message"))["data"] == 1


def test_duration_flags_out_of_range_are_refused():
    """Durations are added to clock readings: a huge one is a usage error, not a trap."""
    import subprocess
    from conftest import relay_binary
    proc = subprocess.run([relay_binary(), "serve", "--listen", "127.0.0.1:0", "--grace", "9223372036854775807"],
                          capture_output=True, timeout=20)
    assert proc.returncode not in (0, 132, -4) and b"grace" in proc.stderr


def test_content_length_with_a_sign_or_repeated_is_400(relay):
    import socket
    for extra in (b"Content-Length: +5\r\n", b"Content-Length: 5\r\nContent-Length: 5\r\n",
                  b"Content-Length: 99999999999999999999999\r\n"):
        with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as s:
            s.sendall(b"POST /v1/sessions HTTP/1.1\r\nHost: a\r\n" + extra + b"\r\nhello")
            assert s.recv(100).startswith(b"HTTP/1.1 400"), extra
    assert relay.proc.poll() is None


def test_message_limit_beyond_the_codec_is_refused():
    """The codec keeps its message limit in 32 bits: past 1 GiB is a usage error, not a trap."""
    import subprocess
    from conftest import relay_binary
    proc = subprocess.run([relay_binary(), "serve", "--listen", "127.0.0.1:0", "--max-message-bytes", str(1 << 33)],
                          capture_output=True, timeout=20)
    assert proc.returncode not in (0, 132, -4) and b"max-message-bytes" in proc.stderr
