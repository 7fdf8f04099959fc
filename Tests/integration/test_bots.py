"""relay-bots end to end: the smoke scenario against a real relay (dev mode)
and against the Python room-broadcast peer, each bounded in time.

Checks what the bots report (every bot checks seq continuity, hand queues,
call outcomes, lost/restored pairing, errors and deliveries) and that the
run exits 0.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PEER = ROOT / "Benchmarks" / "peers" / "python-websockets-broadcast.py"
RUN_TIMEOUT_S = 60


def bots_binary() -> Path:
    env = os.environ.get("RELAY_BOTS_BIN")
    path = Path(env) if env else ROOT / ".build" / "debug" / "relay-bots"
    if not path.exists():
        pytest.skip(f"{path} not built (swift build --product relay-bots)")
    return path


def run_bots(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, dict]:
    report = tmp_path / "report.json"
    cmd = [str(bots_binary()), "run", *args, "--quiet", "--json", str(report)]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    assert report.exists(), f"no report; stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    return proc, json.loads(report.read_text())


def assert_clean(proc: subprocess.CompletedProcess, report: dict, more: str = "") -> None:
    """`more`: what else explains a failure (the relays' logs)."""
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}{more}"
    assert proc.returncode == 0, detail
    assert report["checkFailures"] == 0, detail
    for name, check in report["checks"].items():
        assert check["failures"] == 0, f"{name}: {check['samples']}"
    assert report["deliveriesReceived"] == report["deliveriesExpected"], detail
    assert report["deliveriesReceived"] > 0, detail


def test_smoke_against_relay(relay_factory, tmp_path):
    relay = relay_factory()
    proc, report = run_bots(tmp_path, "smoke", "--dev", "--url", relay.ws + "/v1/ws")
    assert_clean(proc, report)
    assert report["bots"] == 20
    assert report["messagesAcked"] == report["messagesSent"]
    assert report["handCommands"] > 0
    assert report["checks"]["seq-continuity"]["checked"] > 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def python_peer():
    pytest.importorskip("websockets")
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, str(PEER), "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
            break
        except OSError:
            time.sleep(0.05)  # polling a port that is not open yet: no event to await
    else:
        proc.kill()
        pytest.fail("broadcast peer did not start")
    yield f"ws://127.0.0.1:{port}"
    proc.terminate()
    proc.wait(timeout=10)


def test_smoke_against_python_broadcast_peer(python_peer, tmp_path):
    proc, report = run_bots(tmp_path, "smoke", "--protocol", "broadcast", "--url", python_peer)
    assert_clean(proc, report)
    assert report["protocol"] == "broadcast"
    assert report["deliveryLatencyUs"]["count"] == report["deliveriesReceived"]


# The checks must still fail when deliveries go missing or arrive twice:
# `--fault` makes the bots discard (or handle twice) every Nth message event
# they receive, before any check sees it, as if the server had lost (or
# repeated) that delivery. The events go through the same fast path as in a
# fan-out benchmark run.

def run_with_fault(tmp_path, fault: str, *args: str):
    proc, report = run_bots(tmp_path, "smoke", "--fault", fault, *args)
    detail = f"stdout:\n{proc.stdout}\nstderr:\n{proc.stderr}"
    assert proc.returncode == 1, detail
    assert report["checkFailures"] > 0, detail
    return report, detail


def test_dropped_delivery_fails_seq_and_delivery_checks(relay_factory, tmp_path):
    relay = relay_factory()
    report, detail = run_with_fault(tmp_path, "drop-message:7", "--dev", "--url", relay.ws + "/v1/ws")
    seq = report["checks"]["seq-continuity"]
    assert seq["failures"] > 0, detail
    assert any("gap" in s for s in seq["samples"]), seq["samples"]
    assert report["checks"]["deliveries"]["failures"] > 0, detail
    assert report["deliveriesReceived"] < report["deliveriesExpected"], detail


def test_duplicated_delivery_fails_seq_and_delivery_checks(relay_factory, tmp_path):
    relay = relay_factory()
    report, detail = run_with_fault(tmp_path, "duplicate-message:7", "--dev", "--url", relay.ws + "/v1/ws")
    seq = report["checks"]["seq-continuity"]
    assert seq["failures"] > 0, detail
    assert any("duplicate" in s for s in seq["samples"]), seq["samples"]
    # A repeated seq is rejected, not counted a second time.
    assert report["deliveriesReceived"] == report["deliveriesExpected"], detail


def test_duplicated_broadcast_delivery_fails_delivery_check(python_peer, tmp_path):
    report, detail = run_with_fault(
        tmp_path, "duplicate-message:7", "--protocol", "broadcast", "--url", python_peer)
    assert report["checks"]["deliveries"]["failures"] > 0, detail
    assert report["deliveriesReceived"] > report["deliveriesExpected"], detail


def test_dropped_broadcast_delivery_fails_delivery_check(python_peer, tmp_path):
    report, detail = run_with_fault(tmp_path, "drop-message:7", "--protocol", "broadcast", "--url", python_peer)
    assert report["checks"]["deliveries"]["failures"] > 0, detail
    assert report["deliveriesReceived"] < report["deliveriesExpected"], detail


def test_fanout_message_layout_against_relay(relay_factory, tmp_path):
    """A short fan-out run: every message event matches the fast layout (a
    relay that changed its key order would silently halve the bots'
    capacity), and every delivery is checked and timed."""
    relay = relay_factory("--message-rate", "1000000")
    scenario = tmp_path / "fanout-small.json"
    scenario.write_text(json.dumps({
        "name": "fanout-small", "durationMs": 1500, "quietMs": 500, "rampPerSecond": 1000,
        "population": {"sessions": 2, "members": 20, "hosts": 0, "sessionPrefix": "fs"},
        "payloadBytes": 30,
        "behaviours": [{"kind": "publish", "publishersPerSession": 1, "inflight": 8}],
    }))
    proc, report = run_bots(tmp_path, str(scenario), "--dev", "--url", relay.ws + "/v1/ws")
    assert_clean(proc, report)
    assert report["messageLayoutMisses"] == 0, report
    assert report["deliveryLatencyUs"]["count"] == report["deliveriesReceived"]
