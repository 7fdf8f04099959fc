"""The big-room join storm of `make bench-abuse`: `sessions` × `members` raw members join as
fast as the relay lets them and then read nothing (their kernel buffers fill), while two
canary clients in a session of their own send an app message every 100 ms and a prober
asks `/metrics` and `/readyz` every 200 ms. The storm, the canaries and the prober run
in separate processes, so none of them waits on another's interpreter lock.

    python3 Benchmarks/storm.py [SESSIONS MEMBERS]      (RELAY_BIN: the relay to measure)

Runs against any build since fc485d8 (flags an older build lacks are left out), so the
same script measures every commit of a bisection.
"""
from __future__ import annotations

import asyncio
import json
import multiprocessing as mp
import os
import selectors
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
os.environ.setdefault("RELAY_BIN", str(ROOT / ".build" / "release" / "relay"))

from abuse_util import masked_text  # noqa: E402
from conftest import RelayProcess  # noqa: E402
from relayclient import Client  # noqa: E402

JOIN_WINDOW = 256  # members connecting at once (below the relay's listen backlog of 1 024)
PROBE_TIMEOUT_S = 3.0


def opening(uid: str, session: str) -> bytes:
    key = "dGhlIHNhbXBsZSBub25jZQ=="
    return (
        f"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: relay.v1\r\n\r\n".encode()
        + masked_text(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}).encode())
        + masked_text(json.dumps({"type": "session.join", "session": session}).encode())
    )


def storm(port: int, sessions: int, members: int, results, stop) -> None:
    """Opens every member (at most JOIN_WINDOW waiting for their snapshot at once), reads
    each one only until its `session.joined`, then never again; reports the ramp."""
    sel = selectors.DefaultSelector()
    total, started, joined, failed = sessions * members, 0, 0, 0
    kept: list[socket.socket] = []
    t0 = report = time.monotonic()
    while joined + failed < total:
        if os.environ.get("STORM_PROGRESS") and time.monotonic() > report + 5:
            report = time.monotonic()
            print(f"  {report - t0:.0f} s: {started} started, {joined} joined, {failed} failed", file=sys.stderr, flush=True)
        while started < total and started - joined - failed < JOIN_WINDOW:
            s = socket.create_connection(("127.0.0.1", port), timeout=30)
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            s.sendall(opening(f"m{started}", f"big{started % sessions}"))
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, b"")
            kept.append(s)
            started += 1
        for key, _ in sel.select(timeout=1):
            try:
                chunk = key.fileobj.recv(65536)
            except BlockingIOError:
                continue
            seen = key.data + chunk
            if not chunk or b"session.joined" in seen:
                sel.unregister(key.fileobj)
                joined += bool(chunk)
                failed += not chunk
            else:
                sel.modify(key.fileobj, selectors.EVENT_READ, seen[-32:])
    results.put(("ramp", time.monotonic() - t0, failed))
    stop.wait()
    for s in kept:
        s.close()


def canary(port: int, results, stop, ready) -> None:
    async def run():
        a, b = await Client.connect(f"ws://127.0.0.1:{port}"), await Client.connect(f"ws://127.0.0.1:{port}")
        for c, uid in ((a, "canary-a"), (b, "canary-b")):
            await c.hello_dev(uid)
            await c.send({"type": "session.join", "session": "canary"})
            await c.recv_type("session.joined")
        ready.set()
        latencies, refused, sent_at = [], 0, {}
        # Until the relay handled it: the message event's `ts` (the relay's wall clock,
        # the same host's) minus the wall time of sending; splits a slow answer into
        # waiting to be read and waiting to be written.
        sent_wall, handled = {}, []
        uid_of = {id(a): "canary-a", id(b): "canary-b"}

        async def receive(c):
            nonlocal refused
            async for raw in c.ws:
                m = json.loads(raw)
                if m.get("type") == "message" and f"m{m.get('data')}" in sent_wall and m.get("from") == uid_of[id(c)]:
                    handled.append(m["ts"] / 1000 - sent_wall.pop(f"m{m['data']}"))
                if m.get("re") in sent_at:
                    latencies.append(time.monotonic() - sent_at.pop(m["re"]))
                    refused += m["type"] == "error"

        readers = [asyncio.create_task(receive(c)) for c in (a, b)]
        n = 0
        while not stop.is_set():
            for c in (a, b):
                sent_at[f"m{n}"], sent_wall[f"m{n}"] = time.monotonic(), time.time()
                await c.send({"type": "message.send", "id": f"m{n}", "session": "canary", "data": n})
                n += 1
            await asyncio.sleep(0.1)
        deadline = time.monotonic() + 10
        while sent_at and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for r in readers:
            r.cancel()
        results.put(("canary", latencies, refused, len(sent_at), n, handled))

    asyncio.run(run())


def prober(port: int, results, stop) -> None:
    times: dict[str, list[float]] = {"/metrics": [], "/readyz": []}
    while not stop.is_set():
        for path, seen in times.items():
            t = time.monotonic()
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=PROBE_TIMEOUT_S) as r:
                    r.read()
            except OSError:
                pass  # a 503 from /readyz is an answer; a timeout counts as PROBE_TIMEOUT_S
            seen.append(min(time.monotonic() - t, PROBE_TIMEOUT_S))
        time.sleep(0.2)
    results.put(("probe", times))


def pct(values: list[float], p: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))]


def relay_flags(extra: list[str]) -> list[str]:
    """The storm's flags, minus those the measured build does not know."""
    known = subprocess.run([os.environ["RELAY_BIN"], "serve", "--help"], capture_output=True, text=True).stdout
    flags = ["--heartbeat-interval", "0", "--heartbeat-timeout", "0"]
    if "--session-join-rate" in known:
        flags += ["--session-join-rate", "0"]
    return flags + extra


class Watch:
    """The canaries and the prober, each in a process of its own, from `start` to `stop`."""

    def __init__(self, port: int):
        self.results, self.stop_event, ready = mp.Queue(), mp.Event(), mp.Event()
        self.procs = [mp.Process(target=canary, args=(port, self.results, self.stop_event, ready)),
                      mp.Process(target=prober, args=(port, self.results, self.stop_event))]
        for p in self.procs:
            p.start()
        ready.wait(30)

    def stop(self) -> dict:
        self.stop_event.set()
        got = {}
        for _ in self.procs:
            item = self.results.get(timeout=60)
            got[item[0]] = item[1:]
        for p in self.procs:
            p.join(10)
        return got

    @staticmethod
    def text(got: dict) -> str:
        latencies, refused, unanswered, sent, handled = got["canary"]
        ms = [x * 1000 for x in latencies]
        read_ms = [x * 1000 for x in handled]
        parts = [f"canary p50 {pct(ms, .5):.1f} ms / p99 {pct(ms, .99):.0f} ms / max {max(ms, default=0):.0f} ms, "
                 f"refused {refused} and unanswered {unanswered} of {sent} "
                 f"(until handled: p50 {pct(read_ms, .5):.1f} / max {max(read_ms, default=0):.0f} ms)"]
        for path, seen in got["probe"][0].items():
            slow = sum(1 for x in seen if x > 0.1)
            parts.append(f"{path} max {max(seen, default=0) * 1000:.0f} ms ({slow} of {len(seen)} over 100 ms)")
        return "; ".join(parts)


def run(sessions: int, members: int, extra: list[str] | None = None) -> tuple[float, int, str]:
    """One storm against a fresh relay: (ramp seconds, members refused or closed, figures)."""
    relay = RelayProcess(relay_flags(extra or []))
    try:
        watch = Watch(relay.port)
        results, stop = mp.Queue(), mp.Event()
        gen = mp.Process(target=storm, args=(relay.port, sessions, members, results, stop))
        gen.start()
        _, ramp, failed = results.get(timeout=900)
        time.sleep(1)  # the canaries also measure the turns just after the last join
        figures = watch.text(watch.stop())
        stop.set()
        gen.join(60)
        return ramp, failed, figures
    finally:
        relay.stop()


if __name__ == "__main__":
    n_sessions, n_members = (int(sys.argv[1]), int(sys.argv[2])) if len(sys.argv) > 2 else (18, 999)
    ramp_s, lost, text = run(n_sessions, n_members)
    print(f"{n_sessions} × {n_members}: ramp {ramp_s:.1f} s, {lost} failed; {text}", flush=True)
