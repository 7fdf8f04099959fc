#!/usr/bin/env python3
"""Push figures (PROTOCOL.md §9a): `make bench-push`, never part of the tests.

    python3 Benchmarks/push.py [latency] [throughput]   (default: both)

- latency:    ring → push request on the wire: a caller's `call.initiate` leaves the
              client, the APNs fake (Tests/integration/push_fakes.py, TLS + h2, JWT
              verified) records the VoIP push's arrival; one call at a time, p50/p99.
- throughput: 10 000 callee devices registered (apps killed), then rung by 313 calls of
              32 callees at once; pushes/s = answered pushes / time from the first
              `call.initiate` to the last answer, against nghttpd (nghttp2's HTTP/2
              server; 200 to a POST on a path it has a file for) over TLS. Also the relay's CPU
              over that window and the resident memory per registered device (RSS
              after registering minus before, devices' sockets closed).

Relay (release build) pinned to core 0, clients and sinks to core 1. Writes
Benchmarks/results/push.md.

PUSH_BENCH_BASELINE=/path/to/an/older/relay: the throughput runs alternate between
that binary and this build's (baseline first), and push.md gets a before/after
table of both medians (ratios from interleaved runs are what a shared, noisy machine
can compare honestly).
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.append(str(ROOT / "Tests" / "integration"))
from cluster import BIN, OTHER_CPU, SERVER_CPU, Procs, cpu_s, free_port, ready, wait_until  # noqa: E402
from push_fakes import APNsFake  # noqa: E402
from relayclient import Client  # noqa: E402

import tlsutil  # noqa: E402

RUNS = int(os.environ.get("BENCH_RUNS", "3"))
BASELINE = os.environ.get("PUSH_BENCH_BASELINE")
STAMP = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
RAW = ROOT / "Benchmarks" / "results" / "raw" / f"push-{STAMP}"
DEVICES = 10_000
PER_CALL = 32


def token(i: int) -> str:
    return "%064x" % (0xB0000 + i)


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def metric(port: int, name: str, **labels) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=60) as r:
        text = r.read().decode()
    total = 0.0
    for line in text.splitlines():
        head = line.split(" ")[0]
        if (head == name or head.startswith(name + "{")) and all(f'{k}="{v}"' in head for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def relay(procs: Procs, tag: str, flags: list[str], binary: str | None = None) -> tuple[int, subprocess.Popen]:
    port = free_port()
    p = procs.start([binary or str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                     "--ring-rate", "0", "--ring-timeout", "60000", *flags], SERVER_CPU, RAW / f"{tag}.relay.log")
    wait_until(lambda: ready(port), 20, "relay")
    return port, p


async def register(port: int, uids: list[str], first: int, concurrency: int = 64) -> None:
    """Each uid: hello with a device id, push.register, clean close (a killed app)."""
    queue = list(enumerate(uids, first))

    async def worker():
        while queue:
            i, uid = queue.pop()
            c = await Client.connect(f"ws://127.0.0.1:{port}")
            await c.send({"type": "hello", "id": "h", "dev": {"uid": uid, "name": uid}, "device": "phone"})
            await c.recv_type("welcome")
            await c.send({"type": "push.register", "id": "r", "token": token(i), "kind": "apns-voip"})
            await c.recv_type("ok")
            await c.close()

    await asyncio.gather(*(worker() for _ in range(concurrency)))


async def caller(port: int, uid: str) -> Client:
    c = await Client.connect(f"ws://127.0.0.1:{port}")
    await c.send({"type": "hello", "id": "h", "dev": {"uid": uid, "name": uid}})
    await c.recv_type("welcome")
    return c


async def latency_run(tag: str, calls: int = 200) -> list[float]:
    procs, fake = Procs(), APNsFake(RAW / tag)
    try:
        port, _ = relay(procs, tag, fake.flags())
        await register(port, [f"callee{i}" for i in range(calls)], 0)
        samples = []
        callers = [await caller(port, f"caller{i}") for i in range(calls // 10 + 1)]  # 10 calls per caller per minute
        for i in range(calls):
            c = callers[i // 10]
            started = time.monotonic()
            await c.send({"type": "call.initiate", "id": "i", "to": [f"callee{i}"], "callType": "audio"})
            ok = await c.recv_type("ok")
            pushes = await asyncio.to_thread(fake.wait_for, lambda rs, cid=ok["callId"]: [
                r for r in rs if r.headers.get("apns-collapse-id") == cid])
            samples.append((pushes[0].at - started) * 1000)
        assert not fake.errors, fake.errors[:3]
        return samples
    finally:
        procs.stop()
        fake.stop()


async def throughput_run(tag: str, binary: str | None = None) -> dict:
    procs = Procs()
    cert, key = tlsutil.make_pair(RAW / tag, "sink")
    try:
        sink_port = free_port()
        # nghttpd answers a POST with the file at its path: an empty file per device token
        # gives 200 (its --echo-upload spools every body to a temporary file and becomes
        # the bottleneck: Benchmarks/results/push.md).
        docs = RAW / tag / "docs" / "3" / "device"
        docs.mkdir(parents=True)
        for i in range(DEVICES):
            (docs / token(i)).touch()
        procs.start([shutil.which("nghttpd") or "/usr/sbin/nghttpd", "-m", "1000", "-d", str(docs.parents[1]),
                     str(sink_port), str(key), str(cert)], OTHER_CPU, RAW / f"{tag}.nghttpd.log")
        p8 = APNsFake(RAW / tag / "key")  # only its .p8 key and flags; the sink answers
        p8.stop()
        flags = [f.replace(p8.url, f"https://localhost:{sink_port}").replace(str(p8.ca), str(cert)) for f in p8.flags()]
        port, proc = relay(procs, tag, flags, binary)
        rss_before = rss_kb(proc.pid)
        await register(port, [f"callee{i}" for i in range(DEVICES)], 0)
        time.sleep(3)  # the relay gives freed heap back every 2 s (heapTrimIntervalMs)
        rss_after = rss_kb(proc.pid)
        callers = [await caller(port, f"caller{i}") for i in range((DEVICES + PER_CALL - 1) // PER_CALL)]
        cpu0, started = cpu_s(proc.pid), time.monotonic()
        for n, c in enumerate(callers):
            to = [f"callee{i}" for i in range(n * PER_CALL, min((n + 1) * PER_CALL, DEVICES))]
            await c.send({"type": "call.initiate", "to": to, "callType": "audio"})
        await asyncio.to_thread(wait_until, lambda: metric(port, "relay_push_sent_total", provider="apns") >= DEVICES, 120,
                                "every push answered")
        elapsed, cpu = time.monotonic() - started, cpu_s(proc.pid) - cpu0
        sent = metric(port, "relay_push_sent_total", provider="apns", result="sent")
        return {"pushes": sent, "seconds": elapsed, "per_s": sent / elapsed, "relay_cpu_s": cpu,
                "cpu_us_per_push": cpu / sent * 1e6, "per_cpu_s": sent / cpu, "load": os.getloadavg()[0],
                "kib_per_device": (rss_after - rss_before) / DEVICES, "rss_before_kib": rss_before, "rss_after_kib": rss_after}
    finally:
        procs.stop()


def compare_lines(before: list[dict], after: list[dict]) -> list[str]:
    """Medians of the baseline's runs and this build's, interleaved, and their ratio."""
    def med(runs, key):
        return statistics.median(r[key] for r in runs)
    rows = [("pushes/s (wall)", "per_s", "{:.0f}"), ("relay CPU µs per push", "cpu_us_per_push", "{:.0f}"),
            ("pushes per relay CPU second", "per_cpu_s", "{:.0f}"), ("load average", "load", "{:.1f}")]
    out = ["### Before/after (interleaved runs)", "", f"Baseline `{BASELINE}`, {len(before)} runs each, medians.", "",
           "| figure | before | after | after / before |", "|---|---|---|---|"]
    for label, key, fmt in rows:
        b, a = med(before, key), med(after, key)
        out.append(f"| {label} | {fmt.format(b)} | {fmt.format(a)} | {a / b:.2f} |")
    out += ["", "Baseline per run: " + ", ".join(f"{r['per_s']:.0f}/s wall, {r['per_cpu_s']:.0f}/CPU-s" for r in before) + "."]
    return out


def main() -> None:
    which = sys.argv[1:] or ["latency", "throughput"]
    RAW.mkdir(parents=True, exist_ok=True)
    lines = [f"# Push figures ({STAMP})", "", "`make bench-push` (Benchmarks/push.py): release build, relay on core 0, "
             "clients and sinks on core 1, loopback, " + f"{RUNS} runs, median shown.", ""]
    if "latency" in which:
        runs = [asyncio.run(latency_run(f"latency{r}")) for r in range(RUNS)]
        p50 = statistics.median(statistics.median(s) for s in runs)
        p99 = statistics.median(statistics.quantiles(s, n=100)[98] for s in runs)
        lines += ["## Ring → push request on the wire", "",
                  "One call at a time to a callee whose only device is asleep; from the caller's `call.initiate` "
                  "leaving the client to the VoIP push's arrival at the APNs fake (TLS, HTTP/2, JWT verified).", "",
                  "| p50 ms | p99 ms | calls per run |", "|---|---|---|", f"| {p50:.2f} | {p99:.2f} | {len(runs[0])} |", ""]
    if "throughput" in which:
        runs, before = [], []
        for r in range(RUNS):
            if BASELINE:
                before.append(asyncio.run(throughput_run(f"baseline{r}", BASELINE)))
            runs.append(asyncio.run(throughput_run(f"throughput{r}")))
        (RAW / "throughput.json").write_text(json.dumps({"runs": runs, "baseline": before}, indent=2))
        med = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
        lines += ["## Pushes per second, 10 000 callee devices", "",
                  f"{DEVICES} registered devices (apps killed) rung by {len(range(0, DEVICES, PER_CALL))} calls of "
                  f"{PER_CALL} callees sent back to back; nghttpd over TLS as the HTTP/2 sink (an empty file per token: 200).", "",
                  "| pushes answered | seconds | pushes/s (wall) | relay CPU s | relay CPU µs per push | "
                  "pushes per relay CPU second | load average | KiB per registered device |",
                  "|---|---|---|---|---|---|---|---|",
                  f"| {med['pushes']:.0f} | {med['seconds']:.2f} | {med['per_s']:.0f} | {med['relay_cpu_s']:.2f} | "
                  f"{med['cpu_us_per_push']:.0f} | {med['per_cpu_s']:.0f} | {med['load']:.1f} | {med['kib_per_device']:.2f} |", "",
                  "Per run: " + ", ".join(f"{r['per_s']:.0f}/s wall, {r['per_cpu_s']:.0f}/CPU-s" for r in runs) + ".", ""]
        if before:
            lines += compare_lines(before, runs)
        lines += [""]
    out = ROOT / "Benchmarks" / "results" / "push.md"
    out.write_text("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
