#!/usr/bin/env python3
"""Cluster figures (docs/cluster.md): `make bench-cluster`, never part of the tests.

    python3 Benchmarks/cluster.py [local] [spread] [latency] [kill] [history] [snapshot] [sentinel] [scale] [scale-big]
                                  [scale-participants]
    (default: all but scale-big and scale-participants)

- local:   fan-out (bots/fanout.json) on a standalone relay and on one node with
           --redis and every member local, alternating, median of BENCH_RUNS (3).
- spread:  the same load with members spread over 3 nodes (bots round-robin).
- latency: 1 000 messages/s into 10 x 100 (bots/rate-1000.json), members spread
           over 2 nodes, so most deliveries cross nodes: p50/p99.
- kill:    SIGKILL of a node → `participant.lost` at a peer on another node, with
           --node-timeout 5000, median of 5 (target ≤ node-timeout + 1 000 ms).
- history: a synthetic writer appends 10 k, 1 M and 5 M records (as the append
           script does) while one node snapshots and trims; Redis memory after each,
           and how long a second node takes to be ready (target ≤ 2 s, flat).
- sentinel: Redis under Sentinel (Benchmarks/cluster_ha.py): append latency with
           --redis-min-replicas 0 and 1, time from a primary SIGKILL to the first
           `ok`, and commands lost.
- snapshot: 10 000 joined participants (bots/idle-10000.json) on one node: the size
           of a snapshot and the time to take it, and a second node's ready time.
- scale:   snapshots at a busy state (docs/cluster.md, "Bounded history"): 2 nodes,
           one client per session sending ~1 KB messages (Tests/integration/
           scale_load.py) until the replay holds 30 MB, then as many again while the
           cluster snapshots every 2 000 records: longest loop turn, snapshot bytes and
           times, snapshots stored, Redis memory over the run, refused commands,
           p50/p99 of the answers. Run with BIN (after) and, when BENCH_BEFORE_BIN
           names another relay binary, with it too (before), and with BIN and snapshots
           switched off (the goals' reference: p99 within 2× of it), alternating,
           BENCH_RUNS times. `scale-big`: the same at 256 MiB (several minutes per run).
- scale-participants: 10 000 and 100 000 joined participants (BENCH_PARTICIPANTS,
           comma-separated) in sessions of 100 over 2 nodes, or as many as the
           20 000-file limit of a process needs (relays and relay-bots shards alike),
           200 messages/s, a snapshot every 2 000 records: the same figures, read
           when the bots' run is over (before 100 000 sockets close).
           BENCH_SNAPSHOTS_OFF=1 runs them with snapshots off (the p99 reference).

Relay processes are pinned to core 0, bots and Redis to core 1 (taskset), all on
loopback. The relay and relay-bots are those of .build/release, or of the directory
BENCH_BIN_DIR names. Prints a Markdown table and writes Benchmarks/results/cluster.md
(or the file BENCH_OUT names: the results file also holds dated sections written by
hand); raw reports go to Benchmarks/results/raw/cluster-<stamp>/ (ignored by git).
"""
from __future__ import annotations

import asyncio
import datetime
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = Path(os.environ.get("BENCH_BIN_DIR", ROOT / ".build" / "release"))  # the relay and relay-bots measured
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
CLK = os.sysconf("SC_CLK_TCK")
STAMP = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
RAW = ROOT / "Benchmarks" / "results" / "raw" / f"cluster-{STAMP}"
SERVER_CPU, OTHER_CPU = ("0", "1") if os.cpu_count() and os.cpu_count() >= 2 else ("0", "0")
FANOUT_FLAGS = ["--message-rate", "1000000", "--max-outbound-bytes", "16777216", "--log-level", "warning"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLK


def wait_until(pred, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return
        time.sleep(0.05)
    raise TimeoutError(what)


def accepts(port: int) -> bool:
    try:
        socket.create_connection(("127.0.0.1", port), 0.2).close()
        return True
    except OSError:
        return False


def ready(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=1) as r:
            return r.status == 200
    except OSError:
        return False


class Procs:
    def __init__(self):
        self.procs: list[subprocess.Popen] = []

    def start(self, args: list[str], cpu: str, log: Path) -> subprocess.Popen:
        p = subprocess.Popen(["taskset", "-c", cpu, *args], stdout=open(log, "wb"), stderr=subprocess.STDOUT)
        self.procs.append(p)
        return p

    def stop(self) -> None:
        for p in self.procs:
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
        self.procs = []


def redis(procs: Procs, tag: str) -> str:
    port = free_port()
    procs.start([shutil.which("redis-server") or "redis-server", "--port", str(port), "--bind", "127.0.0.1",
                 "--save", "", "--appendonly", "no"], OTHER_CPU, RAW / f"{tag}.redis.log")
    wait_until(lambda: accepts(port), 10, "redis")
    return f"redis://127.0.0.1:{port}"


def relays(procs: Procs, tag: str, count: int, redis_url: str | None, extra: list[str]) -> list[tuple[int, subprocess.Popen]]:
    out = []
    for i in range(count):
        port = free_port()
        args = [str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", *extra]
        if redis_url:
            args += ["--redis", redis_url, "--node-id", f"n{i + 1}"]
        p = procs.start(args, SERVER_CPU, RAW / f"{tag}.relay{i + 1}.log")
        wait_until(lambda: ready(port), 20, f"relay {i + 1}")
        out.append((port, p))
    return out


def bots(scenario: str, ports: list[int], tag: str, extra: list[str]) -> tuple[dict, subprocess.Popen]:
    urls = []
    for port in ports:
        urls += ["--url", f"ws://127.0.0.1:{port}/v1/ws"]
    report = RAW / f"{tag}.json"
    p = subprocess.Popen(["taskset", "-c", OTHER_CPU, str(BIN / "relay-bots"), "run", scenario, "--dev", *urls,
                          "--json", str(report), "--quiet", *extra],
                         stdout=open(RAW / f"{tag}.bots.out", "wb"), stderr=open(RAW / f"{tag}.bots.err", "wb"))
    return {"report": report, "err": RAW / f"{tag}.bots.err"}, p


def run_load(tag: str, scenario: str, nodes: int, clustered: bool, extra_bots: list[str] | None = None) -> dict:
    procs = Procs()
    try:
        url = redis(procs, tag) if clustered else None
        servers = relays(procs, tag, nodes, url, FANOUT_FLAGS)
        cpu0 = sum(cpu_s(p.pid) for _, p in servers)
        t0 = time.monotonic()
        info, b = bots(scenario, [port for port, _ in servers], tag, extra_bots or [])
        rc = b.wait(timeout=300)
        wall = time.monotonic() - t0
        cpu = sum(cpu_s(p.pid) for _, p in servers) - cpu0
        r = json.loads(info["report"].read_text())
        deliveries = r["deliveriesReceived"]
        return {
            "tag": tag, "rc": rc, "deliveriesPerSec": deliveries / (r["durationMs"] / 1000),
            "p50": r["deliveryLatencyUs"]["p50"], "p99": r["deliveryLatencyUs"]["p99"],
            "relayCpuPct": 100 * cpu / wall, "checkFailures": r["checkFailures"],
        }
    finally:
        procs.stop()


def median(rows: list[dict], key: str) -> float:
    return statistics.median(r[key] for r in rows)


async def kill_to_lost(trial: int) -> float:
    sys.path.insert(0, str(ROOT / "Tests" / "integration"))
    import websockets  # noqa: PLC0415

    procs = Procs()
    try:
        url = redis(procs, f"kill{trial}")
        (p1, _), (p2, n2) = relays(procs, f"kill{trial}", 2, url, ["--node-timeout", "5000", "--log-level", "warning"])

        async def member(port: int, uid: str):
            ws = await websockets.connect(f"ws://127.0.0.1:{port}/v1/ws", subprotocols=["relay.v1"])
            await ws.send(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}))
            await ws.send(json.dumps({"type": "session.join", "session": "k"}))
            while json.loads(await ws.recv())["type"] != "session.joined":
                pass
            return ws

        alice = await member(p1, "alice")
        await member(p2, "bob")
        while json.loads(await asyncio.wait_for(alice.recv(), 10))["type"] != "participant.joined":
            pass
        killed = time.monotonic()
        n2.send_signal(signal.SIGKILL)
        while True:
            m = json.loads(await asyncio.wait_for(alice.recv(), 20))
            if m["type"] == "participant.lost":
                return (time.monotonic() - killed) * 1000
    finally:
        procs.stop()


# The append script's effect (Sources/RelayClusterNode/ClusterNode+Append.swift), for the writer.
WRITER = (b"local now = redis.call('TIME') "
          b"local ms = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)) "
          b"local n = redis.call('INCR', KEYS[1]) "
          b"return redis.call('XADD', KEYS[2], '*', 'e', ARGV[1], 'n', n, 't', ms)")


def redis_pipeline(port: int, commands: list[list[bytes]]) -> list[bytes]:
    sys.path.insert(0, str(ROOT / "Tests" / "integration"))
    import redisutil  # noqa: PLC0415  (the tests' client, one copy)
    return redisutil.pipeline(port, commands)


def scrape(port: int, timeout: float = 2) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=timeout) as r:
        return r.read().decode()


def metric(port: int, name: str, text: str | None = None) -> float:
    """`name`'s value on the node at `port`, or in `text` scraped from it earlier."""
    for line in (scrape(port) if text is None else text).splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


def used_memory(port: int) -> int:
    info = redis_pipeline(port, [[b"INFO", b"memory"]])[0].decode()
    return int(next(x.split(":")[1] for x in info.splitlines() if x.startswith("used_memory:")))


def ready_time(procs: Procs, tag: str, url: str, extra: list[str] | None = None) -> float:
    port = free_port()
    t0 = time.monotonic()
    procs.start([str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", "--redis", url, "--node-id", tag,
                 "--log-level", "warning", *(extra or [])], SERVER_CPU, RAW / f"{tag}.log")
    node = procs.procs[-1]
    wait_until(lambda: ready(port), 60, tag)
    took = time.monotonic() - t0
    node.send_signal(signal.SIGKILL)  # measured; it must not slow the next steps down
    node.wait()
    return took


def history() -> list[str]:
    procs = Procs()
    rows = ["| records written | Redis used_memory | log length | second node ready (s) |", "|---|---|---|---|"]
    try:
        url = redis(procs, "history")
        rport = int(url.rsplit(":", 1)[1])
        (port, _), = relays(procs, "history", 1, url, ["--log-level", "warning"])
        g = redis_pipeline(rport, [[b"GET", b"relay:{relay}:generation"]])[0].decode()
        seq, log = f"relay:{{relay}}:seq:{g}".encode(), f"relay:{{relay}}:log:{g}".encode()
        sha = redis_pipeline(rport, [[b"SCRIPT", b"LOAD", WRITER]])[0]
        beat = bytes([2, 1, 0, 0, 0, 1, 0, 0, 0, 3])  # node 1's beat, format 2
        written = 0
        for target in (10_000, 1_000_000, 5_000_000):
            while written < target:
                n = min(50_000, target - written)
                redis_pipeline(rport, [[b"EVALSHA", sha, b"2", seq, log, beat]] * n)
                written += n
            wait_until(lambda: metric(port, "relay_cluster_log_position") >= written, 600, "node caught up")
            time.sleep(1)  # let the last snapshot's trim land; a figure, not a synchronisation
            length = int(redis_pipeline(rport, [[b"XLEN", log]])[0][1:])
            ready = statistics.median(ready_time(procs, f"join{target}-{i}", url) for i in range(3))
            rows.append(f"| {target:,} | {used_memory(rport) / 1e6:.1f} MB | {length:,} | {ready:.2f} |")
            print(rows[-1], flush=True)
    finally:
        procs.stop()
    return rows


def snapshot_section() -> list[str]:
    procs = Procs()
    try:
        url = redis(procs, "snap")
        # Every node of a cluster has the same shared flags (the joining node too).
        shared = ["--snapshot-records", "50", "--heartbeat-timeout", "60000"]
        (port, _), = relays(procs, "snap", 1, url, ["--log-level", "warning", *shared])
        _, b = bots("idle-10000", [port], "snap", ["--duration", "120000"])
        wait_until(lambda: metric(port, "relay_participants") >= 9_900, 120, "10 000 joined")
        stored = metric(port, "relay_cluster_snapshots_stored_total")
        wait_until(lambda: metric(port, "relay_cluster_snapshots_stored_total") > stored + 1, 120, "a snapshot")
        size, secs = metric(port, "relay_cluster_snapshot_bytes"), metric(port, "relay_cluster_snapshot_seconds")
        join = ready_time(procs, "snap-join", url, shared)
        b.send_signal(signal.SIGINT)
        b.wait(timeout=60)
        return ["", f"Snapshot with {metric(port, 'relay_participants'):,.0f} participants: {size / 1e6:.2f} MB, "
                f"taken in {secs * 1000:.1f} ms; a second node ready in {join:.2f} s."]
    finally:
        procs.stop()


# Records between snapshots in the scale runs (BENCH_SNAPSHOT_RECORDS): far more often
# than the default, so each run makes dozens.
SCALE_SNAPSHOT_RECORDS = int(os.environ.get("BENCH_SNAPSHOT_RECORDS", "2000"))


def snapshot_figures(ports: list[int], memory: list[float], texts: list[str] | None = None) -> dict:
    """What a scale row reports of the nodes' snapshots and loop turns, and Redis's memory
    (from `texts` when the nodes' metrics were scraped earlier)."""
    texts = texts or [scrape(p, 60) for p in ports]

    def worst(name: str) -> float:
        return max(metric(p, name, t) for p, t in zip(ports, texts))

    return {
        "turnMaxMs": worst("relay_loop_turn_max_microseconds") / 1e3,
        "over50": max(turns_over_50ms(t) for t in texts),
        "turnCpuMaxMs": worst("relay_loop_turn_cpu_max_microseconds") / 1e3,
        "cpuOver50": max(turns_over_50ms(t, "relay_loop_turn_cpu_seconds") for t in texts),
        "snapshotMB": worst("relay_cluster_snapshot_bytes") / 1e6,
        "captureMs": worst("relay_cluster_snapshot_capture_seconds") * 1e3,
        "captureMaxMs": worst("relay_cluster_snapshot_capture_max_seconds") * 1e3,
        "captureCpuMaxMs": worst("relay_cluster_snapshot_capture_cpu_max_seconds") * 1e3,
        "snapshotMs": worst("relay_cluster_snapshot_seconds") * 1e3,
        "stored": sum(metric(p, "relay_cluster_snapshots_stored_total", t) for p, t in zip(ports, texts)),
        "due": metric(ports[0], "relay_cluster_log_position", texts[0]) // SCALE_SNAPSHOT_RECORDS,
        "redisMaxMB": max(memory or [0]), "redisEndMB": memory[-1] if memory else 0,
    }


def turns_over_50ms(text: str, histogram: str = "relay_loop_turn_seconds") -> int:
    """Loop turns longer than 50 ms so far, in a node's scraped metrics
    (`relay_loop_turn_seconds`: busy time; `relay_loop_turn_cpu_seconds`: the loop
    thread's CPU time)."""
    total = below = 0.0
    for line in text.splitlines():
        if line.startswith(f"{histogram}_count"):
            total = float(line.split()[1])
        if line.startswith(f'{histogram}_bucket{{le="0.05"}}'):
            below = float(line.split()[1])
    return int(total - below)


# Records and bytes between snapshots that no scale run reaches: the "snapshots off" row.
NEVER = str(1 << 40)


def scale_run(binary: Path, tag: str, replay_mb: int, snapshots: bool = True) -> dict:
    """One scale run (see the module comment); the figures of both nodes, worst first.
    `snapshots=False`: the same load with snapshots switched off, the goals' reference."""
    sys.path.insert(0, str(ROOT / "Tests" / "integration"))
    import scale_load  # noqa: PLC0415  (the scale test's load, one copy)

    procs = Procs()
    sessions = replay_mb  # each session's replay holds up to 1 MiB (--replay-bytes default)
    flags = ["--log-level", "warning", "--message-rate", "1000000", "--heartbeat-timeout", "60000",
             "--replay-budget-bytes", str((replay_mb + 16) << 20)]
    flags += ["--snapshot-records", str(SCALE_SNAPSHOT_RECORDS)] if snapshots else \
        ["--snapshot-records", NEVER, "--snapshot-bytes", NEVER]
    try:
        url = redis(procs, tag)
        rport = int(url.rsplit(":", 1)[1])
        servers = []
        for i in range(2):
            port = free_port()
            procs.start([str(binary), "serve", "--listen", f"127.0.0.1:{port}", "--redis", url, "--node-id",
                         f"n{i + 1}", *flags], SERVER_CPU, RAW / f"{tag}.relay{i + 1}.log")
            wait_until(lambda: ready(port), 20, f"relay {i + 1}")
            servers.append(port)
        memory: list[float] = []
        done = asyncio.Event()

        async def sample() -> None:
            while not done.is_set():
                memory.append(await asyncio.to_thread(used_memory, rport) / 1e6)
                try:
                    await asyncio.wait_for(done.wait(), 1.0)
                except TimeoutError:
                    pass

        async def load() -> tuple:
            sampler = asyncio.create_task(sample())
            urls = [f"ws://127.0.0.1:{p}" for p in servers]
            senders = await scale_load.join_all(urls, sessions)
            t0 = time.monotonic()
            filled = await scale_load.fill(senders, 1_100, 1_000)
            steady = await scale_load.fill(senders, 1_100, 1_000)
            wall = time.monotonic() - t0
            done.set()
            await sampler
            return filled, steady, wall

        filled, steady, wall = asyncio.run(load())

        refused = sum(filled.errors.values()) + sum(steady.errors.values())
        return {
            "tag": tag, **snapshot_figures(servers, memory), "refused": refused,
            "p50": steady.quantile(0.5) * 1e3, "p99": steady.quantile(0.99) * 1e3,
            "msgsPerSec": (filled.ok + steady.ok) / wall,
        }
    finally:
        procs.stop()


def scale_rows(replay_mb: int) -> list[str]:
    before = os.environ.get("BENCH_BEFORE_BIN")
    builds = [("after", BIN / "relay", True)] + ([("before", Path(before), True)] if before else [])
    builds += [("snapshots off", BIN / "relay", False)]
    rows: dict[str, list[dict]] = {name: [] for name, _, _ in builds}
    for i in range(RUNS):  # alternating, so drift on a shared machine hits both
        for name, binary, snapshots in builds:
            r = scale_run(binary, f"scale{replay_mb}-{name.replace(' ', '-')}{i}", replay_mb, snapshots)
            rows[name].append(r)
            print(f"  {name} run {i}: {json.dumps(r)}", flush=True)
    out = [f"| {replay_mb} MB of replay | longest turn ms (CPU) | turns > 50 ms (CPU) | snapshot MB | on-loop capture ms | "
           "join+digest ms | stored / due | Redis max / end MB | refused | p50 ms | p99 ms | msgs/s |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, _, _ in builds:
        rs = rows[name]
        out.append(f"| {name} | {median(rs, 'turnMaxMs'):.0f} ({median(rs, 'turnCpuMaxMs'):.0f}) | "
                   f"{median(rs, 'over50'):.0f} ({median(rs, 'cpuOver50'):.0f}) | {median(rs, 'snapshotMB'):.0f} | "
                   f"{median(rs, 'captureMs'):.1f} | {median(rs, 'snapshotMs'):.0f} | "
                   f"{median(rs, 'stored'):.0f} / {median(rs, 'due'):.0f} | "
                   f"{median(rs, 'redisMaxMB'):.0f} / {median(rs, 'redisEndMB'):.0f} | {median(rs, 'refused'):.0f} | "
                   f"{median(rs, 'p50'):.1f} | {median(rs, 'p99'):.0f} | {median(rs, 'msgsPerSec'):,.0f} |")
        print(out[-1], flush=True)
    return out


PARTICIPANTS_PER_PROCESS = 19_000  # each process may open 20 000 files (relay-bots --shard; a relay node)


def participants_run(total: int, members: int, tag: str) -> dict:
    """`total` joined participants in sessions of `members` over as many nodes and bot
    processes as the 20 000-file limit needs, 200 messages/s among them for 20 s, a
    snapshot every 2 000 records (the joins are records too): the scale row's figures."""
    nodes = max(2, -(-total // PARTICIPANTS_PER_PROCESS))
    shards = -(-total // PARTICIPANTS_PER_PROCESS)
    scenario = RAW / f"{tag}.scenario.json"
    scenario.write_text(json.dumps({
        "name": tag, "description": "scale-participants", "durationMs": 20_000, "quietMs": 1_000,
        "rampPerSecond": 1_000 // shards, "population": {"sessions": total // members, "members": members, "hosts": 0,
                                                        "sessionPrefix": "p"},
        "payloadBytes": 30, "behaviours": [{"kind": "message", "perSecond": 200 // shards}]}))
    procs = Procs()
    every = ["--snapshot-records", NEVER, "--snapshot-bytes", NEVER] if PARTICIPANTS_SNAPSHOTS_OFF else \
        ["--snapshot-records", str(SCALE_SNAPSHOT_RECORDS)]
    flags = ["--log-level", "warning", "--heartbeat-timeout", "60000", *every, "--max-participants", str(members)]
    try:
        url = redis(procs, tag)
        rport = int(url.rsplit(":", 1)[1])
        ports = [port for port, _ in relays(procs, tag, nodes, url, flags)]
        memory: list[float] = []
        runs = [bots(str(scenario), ports, f"{tag}.shard{k}", ["--shard", f"{k}/{shards}", "--seed", str(k + 1)])
                for k in range(shards)]
        texts: list[str] | None = None
        while any(p.poll() is None for _, p in runs):
            memory.append(used_memory(rport) / 1e6)
            # The figures of the run, before the bots close their sockets: 100 000
            # closes (each a record every node applies) would be a storm of their own.
            if texts is None and any(b"run over" in info["err"].read_bytes() for info, _ in runs):
                texts = [scrape(port, 60) for port in ports]
            time.sleep(1)
        reports = [json.loads(info["report"].read_text()) for info, _ in runs]

        return {
            "tag": tag, "nodes": nodes, "joined": sum(r["bots"] for r in reports), **snapshot_figures(ports, memory, texts),
            "refused": sum(r["errorsReceived"] for r in reports), "checkFailures": sum(r["checkFailures"] for r in reports),
            "p50": max(r["deliveryLatencyUs"]["p50"] for r in reports) / 1e3,
            "p99": max(r["deliveryLatencyUs"]["p99"] for r in reports) / 1e3,
        }
    finally:
        procs.stop()


# BENCH_SNAPSHOTS_OFF=1: the same runs with snapshots switched off (the p99 reference).
PARTICIPANTS_SNAPSHOTS_OFF = os.environ.get("BENCH_SNAPSHOTS_OFF") == "1"


def participants_rows() -> list[str]:
    sizes = [int(n) for n in os.environ.get("BENCH_PARTICIPANTS", "10000,100000").split(",")]
    out = ["| participants (sessions × members) | nodes | joined | longest turn ms (CPU) | turns > 50 ms (CPU) | "
           "snapshot MB | on-loop capture ms, last / longest (CPU) | join+digest ms | stored / due | "
           "Redis max / end MB | refused | check failures | delivery p50 / p99 ms |",
           "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for total in sizes:
        members = 100
        r = participants_run(total, members, f"participants{total}")
        print(f"  {total}: {json.dumps(r)}", flush=True)
        off = ", snapshots off" if PARTICIPANTS_SNAPSHOTS_OFF else ""
        out.append(f"| {total:,} ({total // members} × {members}{off}) | {r['nodes']} | {r['joined']:,} | "
                   f"{r['turnMaxMs']:.0f} ({r['turnCpuMaxMs']:.0f}) | {r['over50']} ({r['cpuOver50']}) | "
                   f"{r['snapshotMB']:.1f} | {r['captureMs']:.1f} / {r['captureMaxMs']:.1f} ({r['captureCpuMaxMs']:.1f}) | "
                   f"{r['snapshotMs']:.0f} | "
                   f"{r['stored']:.0f} / {r['due']:.0f} | {r['redisMaxMB']:.0f} / {r['redisEndMB']:.0f} | {r['refused']} | "
                   f"{r['checkFailures']} | {r['p50']:.1f} / {r['p99']:.1f} |")
        print(out[-1], flush=True)
    return out


def main() -> None:
    which = sys.argv[1:] or ["local", "spread", "latency", "kill", "history", "snapshot", "sentinel", "scale"]
    RAW.mkdir(parents=True, exist_ok=True)
    lines = [f"# Cluster figures, {STAMP}", "",
             f"Machine: {os.cpu_count()} vCPU; relays on core {SERVER_CPU}, bots and Redis on core {OTHER_CPU}; "
             f"medians of {RUNS} runs; raw: `{RAW.relative_to(ROOT)}`.", "",
             "| configuration | deliveries/s | p50 µs | p99 µs | relay CPU % (all nodes) | check failures |",
             "|---|---|---|---|---|---|"]

    def row(name: str, rows: list[dict]) -> None:
        lines.append(f"| {name} | {median(rows, 'deliveriesPerSec'):,.0f} | {median(rows, 'p50'):.0f} | "
                     f"{median(rows, 'p99'):.0f} | {median(rows, 'relayCpuPct'):.0f} | "
                     f"{sum(r['checkFailures'] for r in rows)} |")
        print(lines[-1], flush=True)

    if "local" in which:
        alone, local = [], []
        for i in range(RUNS):  # alternating, so drift on a shared machine hits both
            alone.append(run_load(f"alone{i}", "fanout", 1, False))
            local.append(run_load(f"local{i}", "fanout", 1, True))
        row("fan-out 10 x 100, standalone", alone)
        row("fan-out 10 x 100, one node with --redis (all local)", local)
        ratio = median(local, "deliveriesPerSec") / median(alone, "deliveriesPerSec")
        lines.append(f"| ratio clustered / standalone | {ratio:.2f} (target ≥ 0.8) | | | | |")
        print(lines[-1], flush=True)
    if "spread" in which:
        row("fan-out 10 x 100, members spread over 3 nodes",
            [run_load(f"spread{i}", "fanout", 3, True) for i in range(RUNS)])
    if "latency" in which:
        row("1 000 msg/s into 10 x 100, members over 2 nodes (cross-node p99 target ≤ 5 ms)",
            [run_load(f"rate{i}", "rate-1000", 2, True, ["--duration", "10000"]) for i in range(RUNS)])
    if "kill" in which:
        times = [asyncio.run(kill_to_lost(i)) for i in range(5)]
        lines += ["", f"SIGKILL → `participant.lost` at a peer, `--node-timeout 5000`: median "
                  f"{statistics.median(times):.0f} ms, max {max(times):.0f} ms over 5 (target ≤ 6 000 ms); "
                  f"runs: {', '.join(f'{t:.0f}' for t in times)}"]
        print(lines[-1], flush=True)
    if "history" in which:
        lines += ["", "Bounded history (one node, default `--snapshot-records` 50 000: a snapshot every 50 000 records, the log trimmed behind the "
                  "previous snapshot; a synthetic writer appends single-beat records the way the append script does):",
                  ""] + history()
    if "snapshot" in which:
        lines += snapshot_section()
        print(lines[-1], flush=True)
    if "sentinel" in which:
        import cluster_ha  # noqa: PLC0415  (Benchmarks/, beside this file)

        ctx = sys.modules[__name__]
        ctx.procs = Procs()
        lines += cluster_ha.figures(ctx)
    for mode, mb in (("scale", 30), ("scale-big", 256)):
        if mode in which:
            lines += ["", f"Snapshots at scale, {mb} MB of replay (2 nodes, ~1 KB messages, a snapshot every "
                      f"{SCALE_SNAPSHOT_RECORDS:,} records; medians of {RUNS}; `before`: BENCH_BEFORE_BIN):", ""]
            lines += scale_rows(mb)
    if "scale-participants" in which:
        lines += ["", "Snapshots at 10 k / 100 k participants (sessions of 100, 200 messages/s, a snapshot every "
                  f"{SCALE_SNAPSHOT_RECORDS:,} records; sizes from BENCH_PARTICIPANTS):", ""]
        lines += participants_rows()
    out = Path(os.environ.get("BENCH_OUT", ROOT / "Benchmarks" / "results" / "cluster.md"))
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
