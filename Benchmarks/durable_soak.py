#!/usr/bin/env python3
"""A durable single node under the soak scenario for an hour, watched as an operator
watches it (docs/operating.md): `make bench-durable-soak`, never part of the tests.

    SOAK_SECONDS=3600 python3 Benchmarks/durable_soak.py

One release relay with `--data-dir` (a temp dir under Benchmarks/results/raw) and
`--fsync everysec`; `relay-bots run soak` (bots/soak.json: 1 000 bots in 20
sessions, hands, messages, churn, abrupt drops with resume, ringing) for
SOAK_SECONDS. Every SAMPLE_SECONDS: the data dir's bytes and files, the relay's
RSS, records written and snapshots taken. At the end: SIGKILL, then the time from
exec to `/readyz` 200 on that data dir. Writes Benchmarks/results/durable-soak.md.
"""
from __future__ import annotations

import datetime
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import durable  # noqa: E402  (the shared Relay runner, metric reader and paths)

SECONDS = int(os.environ.get("SOAK_SECONDS", "3600"))
SAMPLE = int(os.environ.get("SAMPLE_SECONDS", "60"))


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def dir_usage(path: Path) -> tuple[int, int]:
    files = [f for f in path.rglob("*") if f.is_file()]
    return sum(f.stat().st_size for f in files), len(files)


def sample(relay: durable.Relay, data: Path, started: float) -> dict:
    size, files = dir_usage(data)
    return {
        "t": round(time.monotonic() - started),
        "bytes": size, "files": files, "rss": rss_mb(relay.proc.pid),
        "records": durable.metric(relay.port, "relay_data_dir_records_total"),
        "snapshots": durable.metric(relay.port, "relay_data_dir_snapshots_total"),
        "participants": durable.metric(relay.port, "relay_participants"),
    }


def main() -> None:
    durable.RAW.mkdir(parents=True, exist_ok=True)
    data = durable.RAW / "soak-data"
    relay = durable.Relay(data, "everysec")
    report = durable.RAW / "soak-report.json"
    bots = subprocess.Popen(
        ["taskset", "-c", durable.OTHER_CPU, str(durable.BIN / "relay-bots"), "run", "soak",
         "--url", f"ws://127.0.0.1:{relay.port}/v1/ws", "--dev", "--duration", str(SECONDS * 1000),
         "--json", str(report), "--quiet"],
        cwd=durable.ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = time.monotonic()
    rows = []
    while bots.poll() is None:
        try:
            bots.wait(timeout=SAMPLE)
        except subprocess.TimeoutExpired:
            pass
        rows.append(sample(relay, data, started))
        print(json.dumps(rows[-1]), file=sys.stderr, flush=True)
    relay.stop(signal.SIGKILL)
    restarted = durable.Relay(data, "everysec")
    replayed = durable.metric(restarted.port, "relay_data_dir_replayed_records_total")
    restarted.stop()
    summary = json.loads(report.read_text()) if report.exists() else {}
    write(rows, restarted.ready_s, replayed, summary, bots.returncode)


def write(rows: list[dict], ready_s: float, replayed: float, summary: dict, code: int) -> None:
    out = [f"# Durable single node under the soak scenario ({datetime.date.today()})", "",
           f"`SOAK_SECONDS={SECONDS} python3 Benchmarks/durable_soak.py`: release relay with `--data-dir` and "
           f"`--fsync everysec`, `relay-bots run soak` for {SECONDS} s (exit {code}), sampled every {SAMPLE} s.", "",
           "| time | data dir | files | relay RSS | records written | snapshots | participants |",
           "|---|---|---|---|---|---|---|"]
    for r in rows:
        out.append(f"| {r['t']} s | {r['bytes'] / 2**20:.2f} MiB | {r['files']} | {r['rss']:.1f} MB | "
                   f"{r['records']:,.0f} | {r['snapshots']:.0f} | {r['participants']:.0f} |")
    out += ["", f"After SIGKILL: ready again in {ready_s * 1000:.0f} ms, {replayed:,.0f} records replayed.", ""]
    failed = {k: v for k, v in summary.items() if "fail" in k.lower() or "error" in k.lower()}
    if failed:
        out += ["Bots' failure counters: " + ", ".join(f"{k} {v}" for k, v in sorted(failed.items())), ""]
    text = "\n".join(out)
    print(text)
    (durable.ROOT / "Benchmarks" / "results" / "durable-soak.md").write_text(text)


if __name__ == "__main__":
    main()
