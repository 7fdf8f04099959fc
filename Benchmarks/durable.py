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
        with urllib.request.urlopen(f"http://127.0.0.1:{port}{path}", timeout=2) as r:
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

    def stop(self, sig=signal.SIGTERM) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            self.proc.wait(timeout=30)
        self.log.close()


def bots(port: int, scenario: str, out: Path) -> dict:
    subprocess.run(["taskset", "-c", OTHER_CPU, str(BIN / "relay-bots"), "run", scenario,
                    "--url", f"ws://127.0.0.1:{port}/v1/ws", "--dev", "--json", str(out), "--quiet"],
                   cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=300)
    return json.loads(out.read_text())


def throughput() -> list[str]:
    scenarios = [("fan-out deliveries/s", "fanout", 1), ("commands/s", str(ROOT / "Benchmarks" / "durable-commands.json"), 2)]
    results: dict[tuple[str, str], list[float]] = {}
    per_record: list[float] = []
    for rnd in range(RUNS):
        for label, scenario, per_message in scenarios:
            for mode in MODES:
                data = RAW / f"data-{mode}-{rnd}-{per_message}"
                relay = Relay(None if mode == "memory" else data, mode)
                report = bots(relay.port, scenario, RAW / f"{mode}-{rnd}-{per_message}.json")
                rate = report["deliveriesReceived"] / (report["durationMs"] / 1000)
                results.setdefault((label, mode), []).append(rate / per_message if per_message > 1 else rate)
                if mode != "memory":
                    records = metric(relay.port, "relay_data_dir_records_total")
                    if records:
                        per_record.append(metric(relay.port, "relay_data_dir_bytes_written_total") / records)
                relay.stop()
                shutil.rmtree(data, ignore_errors=True)
                print(f"  round {rnd + 1} {label} {mode}: {results[(label, mode)][-1]:.0f}", file=sys.stderr)
    lines = ["| load | memory only | `--fsync no` | `--fsync everysec` | `--fsync always` |", "|---|---|---|---|---|"]
    for label, _, _ in scenarios:
        base = statistics.median(results[(label, "memory")])
        cells = [f"{base:,.0f}"]
        for mode in MODES[1:]:
            m = statistics.median(results[(label, mode)])
            cells.append(f"{m:,.0f} ({m / base:.2f}×)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
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
    text = "\n".join(out)
    print(text)
    (ROOT / "Benchmarks" / "results" / "durable.md").write_text(text)


if __name__ == "__main__":
    main()
