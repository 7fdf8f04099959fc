#!/usr/bin/env python3
"""TLS figures (docs/tls.md): `make bench-tls`, never part of the tests.

    python3 Benchmarks/tls.py [fanout] [idle] [handshakes]   (default: all)

- fanout:     bots/fanout.json over ws:// and over wss:// (relay-bots --ca), alternating,
              median of BENCH_RUNS (3): deliveries/s, ratio TLS/plain (target ≥ 0.5).
- idle:       10 000 joined idle connections (bots/idle-10000.json) over ws:// and wss://:
              resident memory per connection: RSS late in the idle run minus RSS at start
              (target: TLS ≤ plain + 4 KiB).
- handshakes: full handshakes per second (`openssl s_time -new`), ECDSA P-256 and RSA 2048.

Relay pinned to core 0, clients to core 1. Writes Benchmarks/results/tls.md.
"""
from __future__ import annotations

import datetime
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from cluster import BIN, OTHER_CPU, SERVER_CPU, Procs, cpu_s, free_port  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RUNS = int(os.environ.get("BENCH_RUNS", "3"))
STAMP = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
RAW = ROOT / "Benchmarks" / "results" / "raw" / f"tls-{STAMP}"


def make_pair(kind: str) -> tuple[Path, Path]:
    cert, key = RAW / f"{kind}.crt", RAW / f"{kind}.key"
    args = ["-newkey", "rsa:2048"] if kind == "rsa" else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256"]
    subprocess.run(["openssl", "req", "-x509", "-nodes", "-days", "2", "-subj", "/CN=localhost", "-keyout", str(key),
                    "-out", str(cert), "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", *args],
                   check=True, capture_output=True)
    return cert, key


def rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def run(tag: str, scenario: str, pair: tuple[Path, Path] | None, extra: list[str]) -> dict:
    procs = Procs()
    try:
        port = free_port()
        args = [str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                "--message-rate", "1000000", "--max-outbound-bytes", "16777216"]
        if pair:
            args += ["--tls-cert", str(pair[0]), "--tls-key", str(pair[1])]
        relay = procs.start(args, SERVER_CPU, RAW / f"{tag}.relay.log")
        deadline = time.monotonic() + 20
        while not (subprocess.run(["curl", "-sk", f"{'https' if pair else 'http'}://127.0.0.1:{port}/healthz"],
                                  capture_output=True).stdout == b"ok"):
            assert time.monotonic() < deadline, "relay did not start"
            time.sleep(0.05)
        base = rss_kb(relay.pid)
        samples: list[int] = []
        done = threading.Event()

        def sample():
            while not done.wait(0.25):
                samples.append(rss_kb(relay.pid))

        threading.Thread(target=sample, daemon=True).start()
        url = f"{'wss' if pair else 'ws'}://127.0.0.1:{port}/v1/ws"
        tls_args = ["--ca", str(pair[0])] if pair else []
        report = RAW / f"{tag}.json"
        cpu0, t0 = cpu_s(relay.pid), time.monotonic()
        bots = subprocess.run(["taskset", "-c", OTHER_CPU, str(BIN / "relay-bots"), "run", scenario, "--dev", "--url", url,
                               *tls_args, "--json", str(report), "--quiet", *extra],
                              capture_output=True, text=True, timeout=600)
        done.set()
        relay_cpu = 100 * (cpu_s(relay.pid) - cpu0) / (time.monotonic() - t0)
        r = json.loads(report.read_text())
        return {"rc": bots.returncode, "deliveriesPerSec": r["deliveriesReceived"] / (r["durationMs"] / 1000),
                "p99": r["deliveryLatencyUs"]["p99"], "bots": r["bots"],
                # Steady state: the last samples while every bot is connected and idle
                # (the ramp's handshakes leave freed heap that the allocator trims later).
                "deltaKb": statistics.median(samples[-12:-4]) - base if len(samples) > 16 else 0,
                "checkFailures": r["checkFailures"], "relayCpuPct": relay_cpu}
    finally:
        procs.stop()


def s_time(pair: tuple[Path, Path]) -> float:
    procs = Procs()
    try:
        port = free_port()
        procs.start([str(BIN / "relay"), "serve", "--listen", f"127.0.0.1:{port}", "--log-level", "warning",
                     "--tls-cert", str(pair[0]), "--tls-key", str(pair[1])], SERVER_CPU, RAW / "stime.relay.log")
        time.sleep(0.5)  # the listener binds at once; s_time retries nothing
        out = subprocess.run(["taskset", "-c", OTHER_CPU, "openssl", "s_time", "-connect", f"127.0.0.1:{port}", "-new",
                              "-time", "5"], capture_output=True, text=True, timeout=60).stdout
        m = re.search(r"(\d+) connections in ([\d.]+) real seconds", out)
        return int(m.group(1)) / float(m.group(2)) if m else 0.0
    finally:
        procs.stop()


def main() -> None:
    which = sys.argv[1:] or ["fanout", "idle", "handshakes"]
    RAW.mkdir(parents=True, exist_ok=True)
    ec = make_pair("ec")
    lines = [f"# TLS figures, {STAMP}", "",
             f"Relay on core {SERVER_CPU}, clients on core {OTHER_CPU}; medians of {RUNS} runs; raw: "
             f"`{RAW.relative_to(ROOT)}`.", ""]
    if "fanout" in which:
        plain, tls = [], []
        for i in range(RUNS):
            plain.append(run(f"fanout-plain{i}", "fanout", None, []))
            tls.append(run(f"fanout-tls{i}", "fanout", ec, []))
        p, t = (statistics.median(x["deliveriesPerSec"] for x in rows) for rows in (plain, tls))
        lines += ["| fan-out 10 x 100, 8 in flight | deliveries/s | p99 µs | relay CPU % | check failures |",
                  "|---|---|---|---|---|",
                  f"| ws:// | {p:,.0f} | {statistics.median(x['p99'] for x in plain):.0f} | "
                  f"{statistics.median(x['relayCpuPct'] for x in plain):.0f} | {sum(x['checkFailures'] for x in plain)} |",
                  f"| wss:// (ECDSA P-256, TLS 1.3) | {t:,.0f} | {statistics.median(x['p99'] for x in tls):.0f} | "
                  f"{statistics.median(x['relayCpuPct'] for x in tls):.0f} | {sum(x['checkFailures'] for x in tls)} |",
                  f"| ratio wss / ws | {t / p:.2f} (target ≥ 0.5) | | | |", ""]
        print("\n".join(lines[-6:]), flush=True)
    if "idle" in which:
        plain = run("idle-plain", "idle-10000", None, [])
        tls = run("idle-tls", "idle-10000", ec, [])
        per = [1024 * x["deltaKb"] / x["bots"] for x in (plain, tls)]
        lines += ["| 10 000 idle joined connections | bytes per connection (RSS when idle − RSS at start) |", "|---|---|",
                  f"| ws:// | {per[0]:,.0f} |", f"| wss:// | {per[1]:,.0f} |",
                  f"| difference | {per[1] - per[0]:,.0f} (target ≤ 4 096) |", ""]
        print("\n".join(lines[-6:]), flush=True)
    if "handshakes" in which:
        rsa = make_pair("rsa")
        lines += ["| full handshakes (`openssl s_time -new`, one client) | per second |", "|---|---|",
                  f"| ECDSA P-256 | {s_time(ec):,.0f} |", f"| RSA 2048 | {s_time(rsa):,.0f} |", ""]
        print("\n".join(lines[-4:]), flush=True)
    out = ROOT / "Benchmarks" / "results" / "tls.md"
    out.write_text("\n".join(lines) + "\n")
    print(f"wrote {out.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
