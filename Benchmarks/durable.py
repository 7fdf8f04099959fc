#!/usr/bin/env python3
"""Durable single-node figures (docs/operating.md): `make bench-durable`, never part
of the tests.

    python3 Benchmarks/durable.py [throughput] [restart]   (default: both)

- throughput: fan-out (bots/fanout.json: 10 x 100, 8 in flight) and command
  throughput (Benchmarks/durable-commands.json: 50 x 2, every member publishing,
  each message.send one record) on a relay without a data dir and with
  `--data-dir` and `--fsync no|everysec|always`, the four interleaved round by
  round, median of BENCH_RUNS (3); ratios to memory-only; disk bytes per record.
- restart: a relay's data dir filled with N message records (the fan-out load
  with the replay bounds raised so the state holds them), then SIGKILL and the
  time from exec to `/readyz` 200, median of 3.
- callgrind: instructions per command (the commands load, 4 s) under
  `valgrind --tool=callgrind`, net of a run that only starts and stops, per mode:
  repeatable where wall time on a shared machine is not. Valgrind 3.19 cannot read
  the debug info Swift writes, so it runs a copy without it (`objcopy
  --strip-debug`; symbols stay).
- restart-big: the same at the issue's sizes, each state made by real clients:
  100 000 participants (1 000 sessions x 100 members of relay-bots, run in shards
  of 10 000 that are SIGKILLed once joined, so every member stays as a lost
  participant within a one-hour grace; no more than 10 000 sockets at once), and
  256 MiB of replay (256 sessions, ~1 KB messages until each session's replay
  holds its 1 MiB: the cluster's scale load, Tests/integration/scale_load.py).

The relay is pinned to core 0, relay-bots to core 1 (taskset), loopback only; the
data dir is on the machine's own disk (a temp dir under Benchmarks/results/raw).
Prints Markdown and writes Benchmarks/results/durable.md.
"""
from __future__ import annotations

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
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BIN = ROOT / ".build" / "release"
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
STAMP = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
RAW = ROOT / "Benchmarks" / "results" / "raw" / f"durable-{STAMP}"
SERVER_CPU, OTHER_CPU = ("0", "1") if (os.cpu_count() or 1) >= 2 else ("0", "0")
FLAGS = ["--message-rate", "1000000", "--max-outbound-bytes", "16777216", "--log-level", "warning"]
MODES = ["memory", "no", "everysec", "always"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(port: int, path: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=10) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, ""


def metric(port: int, name: str) -> float:
    for line in get(port, "/metrics")[1].splitlines():
        if line.startswith(name + " "):
            return float(line.split()[1])
    return 0.0


class Relay:
    def __init__(self, data_dir: Path | None, mode: str, *extra: str):
        self.port = free_port()
        args = [str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{self.port}", *FLAGS, *extra]
        if data_dir is not None:
            args += ["--data-dir", str(data_dir), "--fsync", mode]
        self.log = open(RAW / f"relay-{self.port}.log", "wb")
        self.started = time.monotonic()
        self.proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, *args], stdout=self.log, stderr=subprocess.STDOUT)
        self.ready_s = self.wait_ready()

    def wait_ready(self) -> float:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"relay exited {self.proc.returncode}")
            try:
                if get(self.port, "/readyz")[0] == 200:
                    return time.monotonic() - self.started
            except OSError:
                pass
            time.sleep(0.005)  # polling a port that is not open yet: no event to await
        raise RuntimeError("relay not ready")

    def cpu_s(self) -> float:
        """The relay's CPU time so far (user + system, every thread): unlike wall time,
        not inflated by waiting for a core that other tenants of the machine hold."""
        fields = Path(f"/proc/{self.proc.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.log.close()


def bots(port: int, scenario: str, out: Path, *extra: str) -> dict:
    subprocess.run(["taskset", "-c", OTHER_CPU, str(BIN / "relay-bots"), "run", scenario,
                    "--url", f"ws://127.0.0.1:{port}/v1/ws", "--dev", "--json", str(out), "--quiet", *extra],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return json.loads(out.read_text())


def ratio_table(values: dict[tuple[str, str], list[float]], labels: list[str], fmt: str, ratio) -> list[str]:
    """One row per load: the median of each mode, and `ratio(mode, memory-only)` beside it."""
    lines = ["| load | memory only | `--fsync no` | `--fsync everysec` | `--fsync always` |", "|---|---|---|---|---|"]
    for label in labels:
        base = statistics.median(values[(label, "memory")])
        cells = [fmt.format(base)]
        for mode in MODES[1:]:
            m = statistics.median(values[(label, mode)])
            cells.append(f"{fmt.format(m)} ({ratio(m, base):.2f}×)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def throughput() -> list[str]:
    scenarios = [("fan-out deliveries/s", "fanout", 1), ("commands/s", str(ROOT / "Benchmarks" / "durable-commands.json"), 2)]
    results: dict[tuple[str, str], list[float]] = {}
    cpu_us: dict[tuple[str, str], list[float]] = {}
    per_record: list[float] = []
    for rnd in range(RUNS):
        for label, scenario, per_message in scenarios:
            for mode in MODES:
                data = RAW / f"data-{mode}-{rnd}-{per_message}"
                relay = Relay(None if mode == "memory" else data, mode)
                report = bots(relay.port, scenario, RAW / f"{mode}-{rnd}-{per_message}.json")
                rate = report["deliveriesReceived"] / (report["durationMs"] / 1000)
                results.setdefault((label, mode), []).append(rate / per_message if per_message > 1 else rate)
                # Per message sent (fan-out) or per command: the whole run's CPU.
                cpu_us.setdefault((label, mode), []).append(relay.cpu_s() * 1e6 / max(1, report["messagesSent"]))
                if mode != "memory":
                    records = metric(relay.port, "relay_data_dir_records_total")
                    if records:
                        per_record.append(metric(relay.port, "relay_data_dir_bytes_written_total") / records)
                relay.stop()
                shutil.rmtree(data, ignore_errors=True)
                print(f"  round {rnd + 1} {label} {mode}: {results[(label, mode)][-1]:.0f}", file=sys.stderr)
    labels = [label for label, _, _ in scenarios]
    lines = ratio_table(results, labels, "{:,.0f}", lambda m, base: m / base)
    lines += ["", "Relay CPU time (user + system, all threads) per message sent, µs, and memory-only's "
              "divided by each (the throughput ratio a relay bound by its CPU would show):", ""]
    lines += ratio_table(cpu_us, labels, "{:.1f}", lambda m, base: base / m)
    lines += ["", "Per round (rate / CPU µs per message):", "", "| round | load | " + " | ".join(MODES) + " |",
              "|---|---|" + "---|" * len(MODES)]
    for rnd in range(RUNS):
        for label, _, _ in scenarios:
            cells = [f"{results[(label, m)][rnd]:,.0f} / {cpu_us[(label, m)][rnd]:.1f}" for m in MODES]
            lines.append(f"| {rnd + 1} | {label} | " + " | ".join(cells) + " |")
    lines.append("")
    lines.append(f"Disk bytes written per record (median over the runs): {statistics.median(per_record):.0f}")
    return lines


def restart() -> list[str]:
    lines = ["| state | data dir | records replayed | restart to ready (median of 3) |", "|---|---|---|---|"]
    for seconds in (5, 20):
        data = RAW / f"restart-{seconds}"
        extra = ["--replay-events", "1000000", "--replay-bytes", str(64 << 20), "--replay-age", "3600000"]
        relay = Relay(data, "everysec", *extra)
        scenario = json.loads((ROOT / "bots" / "fanout.json").read_text())
        scenario["durationMs"] = seconds * 1000
        path = RAW / f"fill-{seconds}.json"
        path.write_text(json.dumps(scenario))
        bots(relay.port, str(path), RAW / f"fill-{seconds}-report.json")
        relay.stop(signal.SIGKILL)
        size = sum(f.stat().st_size for f in data.iterdir())
        times, replayed = [], 0.0
        for _ in range(3):
            r = Relay(data, "everysec", *extra)
            times.append(r.ready_s)
            replayed = metric(r.port, "relay_data_dir_replayed_records_total")
            r.stop(signal.SIGKILL)
        lines.append(f"| fan-out for {seconds} s, replay kept | {size / 2**20:.1f} MiB | {replayed:,.0f} | "
                     f"{statistics.median(times) * 1000:.0f} ms |")
        shutil.rmtree(data, ignore_errors=True)
    return lines


def callgrind_ir(binary: Path, mode: str, tag: str, load: bool) -> tuple[int, int]:
    """(instructions, commands) of one relay run under callgrind."""
    port = free_port()
    out = RAW / f"callgrind-{tag}.out"
    args = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}", str(binary), "serve", "--listen",
            f"127.0.0.1:{port}", *FLAGS]
    if mode != "memory":
        args += ["--data-dir", str(RAW / f"data-cg-{tag}"), "--fsync", mode]
    with open(RAW / f"callgrind-{tag}.log", "wb") as log:
        proc = subprocess.Popen(["taskset", "-c", SERVER_CPU, *args], stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if get(port, "/readyz")[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.1)  # polling a port that is not open yet: no event to await
        commands = 0
        if load:
            report = bots(port, str(ROOT / "Benchmarks" / "durable-commands.json"), RAW / f"callgrind-{tag}.json",
                          "--duration", "4000")
            commands = report["commandsSent"]
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=120)
    total = next(int(line.split()[1]) for line in out.read_text().splitlines() if line.startswith("summary:"))
    shutil.rmtree(RAW / f"data-cg-{tag}", ignore_errors=True)
    return total, commands


def callgrind() -> list[str]:
    binary = RAW / "relay-nodebug"
    subprocess.run(["objcopy", "--strip-debug", str(BIN / "relay"), str(binary)], check=True)
    lines = ["| | memory only | `--fsync no` | `--fsync everysec` | `--fsync always` |", "|---|---|---|---|---|"]
    per: dict[str, float] = {}
    for mode in MODES:
        idle, _ = callgrind_ir(binary, mode, f"{mode}-idle", False)
        total, commands = callgrind_ir(binary, mode, mode, True)
        per[mode] = (total - idle) / max(1, commands)
        print(f"  callgrind {mode}: {commands} commands, {per[mode]:,.0f} instructions each", file=sys.stderr)
    lines.append("| instructions per command | " + " | ".join(
        f"{per[m]:,.0f}" + ("" if m == "memory" else f" ({per['memory'] / per[m]:.2f}×)") for m in MODES) + " |")
    return lines


BIG_FLAGS = ["--grace", "3600000", "--idle-timeout", "3600000", "--heartbeat-timeout", "60000"]


def wait_metric(port: int, name: str, at_least: float, timeout: float) -> float:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            value = metric(port, name)
        except OSError:  # a busy relay (thousands of joins) may answer after the timeout
            value = 0.0
        if value >= at_least:
            return value
        time.sleep(0.2)  # polling /metrics: there is no event to await
    raise RuntimeError(f"{name} stayed below {at_least}")


def fill_participants(relay: Relay, total: int = 100_000, shard_size: int = 10_000) -> None:
    """`total` participants, lost: each shard of relay-bots joins, then is SIGKILLed."""
    sessions = total // 100
    scenario = {"name": "durable-participants", "durationMs": 3_600_000, "quietMs": 0, "rampPerSecond": 4000,
                "population": {"sessions": sessions, "members": 100, "hosts": 0, "sessionPrefix": "big"},
                "behaviours": []}
    path = RAW / "participants.json"
    path.write_text(json.dumps(scenario))
    shards = total // shard_size
    for k in range(shards):
        bots_proc = subprocess.Popen(
            ["taskset", "-c", OTHER_CPU, str(BIN / "relay-bots"), "run", str(path), "--url",
             f"ws://127.0.0.1:{relay.port}/v1/ws", "--dev", "--quiet", "--shard", f"{k}/{shards}"],
            cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            wait_metric(relay.port, "relay_participants", (k + 1) * shard_size, 300)
        finally:
            bots_proc.send_signal(signal.SIGKILL)
            bots_proc.wait(timeout=30)
        print(f"  participants: {(k + 1) * shard_size:,}", file=sys.stderr)


def fill_replay(relay: Relay, mib: int = 256) -> None:
    """`mib` sessions whose replay holds 1 MiB each of ~1 KB messages."""
    sys.path.insert(0, str(ROOT / "Tests" / "integration"))
    import asyncio  # noqa: PLC0415
    import scale_load  # noqa: PLC0415  (the cluster's scale load, one copy)

    async def load() -> None:
        senders = await scale_load.join_all([f"ws://127.0.0.1:{relay.port}"], mib, prefix="replay")
        await scale_load.fill(senders, 1_100, 1_000)
        # No clean leave: a session its last member leaves goes, and its replay with it.
        # The sockets end with the event loop: the members are lost within grace.

    asyncio.run(load())


def restart_big() -> list[str]:
    lines = ["| state | data dir | records replayed | state loaded (`relay_data_dir_replay_seconds`) | "
             "restart to ready (median of 3) | runs |", "|---|---|---|---|---|---|"]
    states = [("100 000 participants (1 000 x 100, lost within grace)", fill_participants, []),
              ("256 MiB of replay (256 sessions x 1 MiB)", fill_replay,
               ["--replay-budget-bytes", str(272 << 20)])]
    for label, fill, extra in states:
        data = RAW / f"restart-big-{fill.__name__}"
        flags = [*BIG_FLAGS, *extra]
        relay = Relay(data, "everysec", *flags)
        fill(relay)
        time.sleep(2)  # a snapshot due at the end of the load finishes off the loop
        participants = metric(relay.port, "relay_participants")
        replay_mib = metric(relay.port, "relay_replay_bytes") / 2**20
        relay.stop(signal.SIGKILL)
        size = sum(f.stat().st_size for f in data.iterdir())
        times, loads, replayed, after = [], [], 0.0, 0.0
        for _ in range(3):
            r = Relay(data, "everysec", *flags)
            times.append(r.ready_s)
            loads.append(metric(r.port, "relay_data_dir_replay_seconds"))
            replayed = metric(r.port, "relay_data_dir_replayed_records_total")
            after = metric(r.port, "relay_participants")
            r.stop(signal.SIGKILL)
        print(f"  {label}: participants {participants:,.0f} -> {after:,.0f}, replay {replay_mib:.0f} MiB, "
              f"times {times}", file=sys.stderr)
        lines.append(f"| {label}: {after:,.0f} participants, {replay_mib:.0f} MiB of replay held | "
                     f"{size / 2**20:.0f} MiB | {replayed:,.0f} | {statistics.median(loads) * 1000:.0f} ms | "
                     f"{statistics.median(times) * 1000:.0f} ms | "
                     f"{', '.join(f'{t * 1000:.0f}' for t in times)} ms |")
        shutil.rmtree(data, ignore_errors=True)
    return lines


def main() -> None:
    parts = sys.argv[1:] or ["throughput", "restart"]
    RAW.mkdir(parents=True, exist_ok=True)
    out = [f"# Durable single node ({datetime.date.today()})", "",
           f"`python3 Benchmarks/durable.py {' '.join(parts)}` on {os.cpu_count()} cores (relay on core {SERVER_CPU}, "
           f"relay-bots on core {OTHER_CPU}, loopback), release build; median of {RUNS} interleaved runs.", ""]
    if "throughput" in parts:
        out += ["## Throughput", ""] + throughput() + [""]
    if "restart" in parts:
        out += ["## Restart to ready", ""] + restart() + [""]
    if "callgrind" in parts:
        out += ["## Instructions per command (callgrind)", ""] + callgrind() + [""]
    if "restart-big" in parts:
        out += ["## Restart to ready at scale", ""] + restart_big() + [""]
    text = "\n".join(out)
    print(text)
    # BENCH_OUT: a run that should not replace the results file writes elsewhere.
    Path(os.environ.get("BENCH_OUT", ROOT / "Benchmarks" / "results" / "durable.md")).write_text(text)


if __name__ == "__main__":
    main()
