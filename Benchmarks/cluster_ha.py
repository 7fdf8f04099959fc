"""Cluster figures under Redis Sentinel (docs/cluster.md, "Redis high availability"),
the `sentinel` section of `Benchmarks/cluster.py`.

A primary, one replica and three sentinels (the tests' fixture,
Tests/integration/cluster.py: down-after-milliseconds 1 000), relay nodes on
`redis+sentinel://…`:

- load: 1 000 messages/s into 10 x 100 (bots/rate-1000.json) over 2 nodes, the
  `ok` of each `message.send` (append, replicas, read back, applied) and the
  deliveries, p50/p99, with `--redis-min-replicas` 0 and 1, runs alternating;
- probe: one `message.send` in flight at a time, 1 000 of them: the append path's
  own latency, with `--redis-min-replicas` 0 and 1;
- failover: one client sends a message every 20 ms on node 1, another member on
  node 2 records what it receives; the primary is SIGKILLed, and brought back as a
  replica of the new one as soon as the sentinels name it (a supervisor's job).
  Time from the kill to the first `ok`; commands lost = `ok`'d but never delivered.

BENCH_SENTINEL=load,probe,failover picks the parts (default all). Redis and the
sentinels are not pinned to a core.
"""
from __future__ import annotations

import asyncio
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))

from cluster import RedisHA, _wait  # noqa: E402  (the tests' fixture, one copy)

# Parts to run (env BENCH_SENTINEL, comma-separated): the load, the one-at-a-time
# probe, the failover.
PARTS = os.environ.get("BENCH_SENTINEL", "load,probe,failover").split(",")
LATENCY_FLAGS = ["--message-rate", "1000000", "--max-outbound-bytes", "16777216", "--log-level", "warning"]
CLIENT_FLAGS = ["--node-timeout", "1500", "--grace", "10000", "--heartbeat-interval", "1000",
                "--heartbeat-timeout", "60000", "--message-rate", "1000000", "--log-level", "warning"]


def _nodes(ctx, ha: RedisHA, count: int, flags: list[str], tag: str) -> list[int]:
    ports = []
    for i in range(count):
        port = ctx.free_port()
        args = [str(ctx.BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", "--redis", ha.url,
                "--node-id", f"n{i + 1}", *flags]
        ctx.procs.start(args, ctx.SERVER_CPU, ctx.RAW / f"{tag}.relay{i + 1}.log")
        ctx.wait_until(lambda: ctx.ready(port), 30, f"relay {i + 1}")
        ports.append(port)
    return ports


def append_latency(ctx, min_replicas: int, trial: int) -> dict:
    tag = f"ha-latency-r{min_replicas}-{trial}"
    with tempfile.TemporaryDirectory() as tmp:
        ha = RedisHA(Path(tmp))
        try:
            ports = _nodes(ctx, ha, 2, [*LATENCY_FLAGS, "--redis-min-replicas", str(min_replicas)], tag)
            info, b = ctx.bots("rate-1000", ports, tag, ["--duration", "10000"])
            b.wait(timeout=300)
            r = json.loads(info["report"].read_text())
            return {"replyP50": r["replyLatencyUs"]["p50"], "replyP99": r["replyLatencyUs"]["p99"],
                    "p50": r["deliveryLatencyUs"]["p50"], "p99": r["deliveryLatencyUs"]["p99"],
                    "checkFailures": r["checkFailures"]}
        finally:
            ctx.procs.stop()
            ha.stop()


async def _member(port: int, uid: str, session: str):
    import websockets  # noqa: PLC0415

    ws = await websockets.connect(f"ws://127.0.0.1:{port}/v1/ws", subprotocols=["relay.v1"])
    await ws.send(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}))
    await ws.send(json.dumps({"type": "session.join", "session": session}))
    while json.loads(await ws.recv())["type"] != "session.joined":
        pass
    return ws


async def _probe(port_a: int, port_b: int, count: int) -> list[float]:
    """`message.send` → `ok`, one at a time (µs), from a member on one node of a
    session whose other member is on the other node."""
    alice, _bob = await _member(port_a, "alice", "p"), await _member(port_b, "bob", "p")
    out = []
    for n in range(count):
        t0 = time.perf_counter()
        await alice.send(json.dumps({"type": "message.send", "id": str(n), "session": "p", "data": n}))
        while True:
            m = json.loads(await alice.recv())
            if m.get("re") == str(n):
                assert m["type"] == "ok", m
                break
        out.append((time.perf_counter() - t0) * 1e6)
    return out


def append_probe(ctx, min_replicas: int, trial: int) -> dict:
    """One command in flight at a time: the append path's own latency, not a load's."""
    tag = f"ha-probe-r{min_replicas}-{trial}"
    with tempfile.TemporaryDirectory() as tmp:
        ha = RedisHA(Path(tmp))
        try:
            a, b = _nodes(ctx, ha, 2, [*CLIENT_FLAGS, "--redis-min-replicas", str(min_replicas)], tag)
            times = sorted(asyncio.run(_probe(a, b, 1000)))
            return {"p50": times[len(times) // 2], "p99": times[int(len(times) * 0.99)]}
        finally:
            ctx.procs.stop()
            ha.stop()


async def _failover_trial(ctx, trial: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        ha = RedisHA(Path(tmp))
        try:
            p1, p2 = _nodes(ctx, ha, 2, CLIENT_FLAGS, f"ha-failover{trial}")

            alice, bob = await _member(p1, "alice", "f"), await _member(p2, "bob", "f")
            oks: dict[str, float] = {}
            sent_at: dict[str, float] = {}
            errors: dict[str, int] = {}
            received: list[tuple[int, str]] = []
            killed: float | None = None
            stop = asyncio.Event()

            async def sender():
                n = 0
                while not stop.is_set():
                    n += 1
                    sent_at[str(n)] = time.monotonic()
                    await alice.send(json.dumps({"type": "message.send", "id": str(n), "session": "f", "data": n}))
                    await asyncio.sleep(0.02)

            async def replies():
                while True:
                    m = json.loads(await alice.recv())
                    if m.get("type") == "ok" and m.get("re") in sent_at:
                        oks[m["re"]] = time.monotonic()
                    elif m.get("type") == "error":
                        errors[m.get("code", "?")] = errors.get(m.get("code", "?"), 0) + 1

            async def deliveries():
                while True:
                    m = json.loads(await bob.recv())
                    if m.get("type") == "message":
                        received.append((m["seq"], str(m["data"])))

            tasks = [asyncio.create_task(t()) for t in (sender, replies, deliveries)]
            await asyncio.sleep(2)
            old, new = ha.primary(), ha.replica()
            killed = time.monotonic()
            old.kill()
            await asyncio.to_thread(_wait, lambda: ha.named_by_all(new.port), 30, "promotion")
            promoted = time.monotonic() - killed
            ha.restart_as_replica(old, of=new)
            deadline = time.monotonic() + 30
            while not any(sent_at[k] > killed for k in oks) and time.monotonic() < deadline:
                await asyncio.sleep(0.01)
            await asyncio.sleep(2)
            stop.set()
            await asyncio.sleep(1.5)  # the last replies and deliveries
            for t in tasks:
                t.cancel()
            # The first `ok` of a command sent after the kill: service is back.
            first_ok = min((t for k, t in oks.items() if sent_at[k] > killed), default=float("nan")) - killed
            delivered = {d for _, d in received}
            seqs = [s for s, _ in received]
            return {"promotedS": promoted, "firstOkS": first_ok,
                    "lost": sum(1 for k in oks if k not in delivered),
                    "duplicates": len(received) - len(delivered),
                    "gaps": sum(1 for a, b in zip(seqs, seqs[1:]) if b != a + 1),
                    "oks": len(oks), "sent": len(sent_at), "errors": errors}
        finally:
            ctx.procs.stop()
            ha.stop()


def figures(ctx) -> list[str]:
    lines = ["", "## Redis Sentinel: primary + 1 replica + 3 sentinels (down-after-milliseconds 1 000)", "",
             "1 000 msg/s into 10 x 100, members over 2 nodes; `ok` latency is `message.send` → `ok` "
             "(append, replicas, read back, applied).", "",
             "| --redis-min-replicas | ok p50 µs | ok p99 µs | delivery p50 µs | delivery p99 µs | check failures |",
             "|---|---|---|---|---|---|"]
    runs: dict[int, list[dict]] = {0: [], 1: []}
    for i in range(ctx.RUNS if "load" in PARTS else 0):  # alternating: drift on a shared machine hits both
        for n in (0, 1):
            runs[n].append(append_latency(ctx, n, i))
    for n, rows in runs.items():
        if not rows:
            continue
        med = {k: statistics.median(r[k] for r in rows) for k in ("replyP50", "replyP99", "p50", "p99")}
        lines.append(f"| {n} | {med['replyP50']:.0f} | {med['replyP99']:.0f} | {med['p50']:.0f} | {med['p99']:.0f} | "
                     f"{sum(r['checkFailures'] for r in rows)} |")
        print(lines[-1], flush=True)
    lines += ["", "One `message.send` in flight at a time (1 000 of them; the other member on the other node): "
              "`ok` latency, medians of the runs' p50 and p99.", "",
              "| --redis-min-replicas | ok p50 µs | ok p99 µs | runs (p50 / p99) |", "|---|---|---|---|"]
    probes: dict[int, list[dict]] = {0: [], 1: []}
    for i in range(ctx.RUNS if "probe" in PARTS else 0):
        for n in (0, 1):
            probes[n].append(append_probe(ctx, n, i))
    for n, rows in probes.items():
        if not rows:
            continue
        lines.append(f"| {n} | {statistics.median(r['p50'] for r in rows):.0f} | "
                     f"{statistics.median(r['p99'] for r in rows):.0f} | "
                     + ", ".join(f"{r['p50']:.0f} / {r['p99']:.0f}" for r in rows) + " |")
        print(lines[-1], flush=True)
    trials = [asyncio.run(_failover_trial(ctx, i)) for i in range(ctx.RUNS if "failover" in PARTS else 0)]
    if not trials:
        return lines
    med = {k: statistics.median(t[k] for t in trials) for k in ("promotedS", "firstOkS")}
    lines += ["", f"Primary SIGKILLed under 50 messages/s (`--redis-min-replicas` 1, the old primary restarted "
              f"as a replica once the sentinels named the new one), {len(trials)} runs: promotion after "
              f"{med['promotedS']:.2f} s, first `ok` after the kill {med['firstOkS']:.2f} s (medians); "
              f"commands lost (ok'd, never delivered): {sum(t['lost'] for t in trials)}; duplicates "
              f"{sum(t['duplicates'] for t in trials)}; seq gaps {sum(t['gaps'] for t in trials)}; runs: "
              + "; ".join(f"{t['firstOkS']:.2f} s, {t['sent']} sent, {t['oks']} ok, errors {t['errors']}"
                          for t in trials)]
    print(lines[-1], flush=True)
    return lines
