"""relay-bots across a 3-node cluster with one node SIGKILLed (or drained) mid-run (§12).

The bots spread round-robin over the three nodes' URLs; once they all joined
(the bots log "all N/N bots ready"), node n1 — the first to join, so the
cluster's ticker — is killed. Its bots' sockets end without a close frame;
they reconnect to the next URL and resume (§8). The run must end with every
check green: per-session seq continuity across the resume, one hand queue,
one outcome per callee, every `participant.lost` resolved, deliveries
received == expected.
"""
from __future__ import annotations

import json
import signal
import subprocess
import threading
import urllib.request
from pathlib import Path

import pytest

from cluster import _wait, cluster  # noqa: F401  (cluster: fixture)
from test_bots import ROOT, assert_clean, bots_binary

# Short timings so a death is declared and resolved well within the run (§5, §12).
NODE_FLAGS = ["--node-timeout", "1500", "--grace", "10000",
              "--heartbeat-interval", "1000", "--heartbeat-timeout", "3000"]
READY_TIMEOUT_S = 30
RUN_TIMEOUT_S = 60


def counter(node, name: str) -> float:
    """A counter from the node's /metrics (the replicated core's: the same
    on every node)."""
    with urllib.request.urlopen(node.http + "/metrics", timeout=2) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " "):
                return float(line.split()[-1])
    return 0.0


class BotsRun:
    """relay-bots in the background; stderr is read line by line so the test
    can wait for a phase line, stdout (the report table) goes to a file."""

    def __init__(self, tmp_path: Path, *args: str):
        self.report = tmp_path / "report.json"
        self.stdout_path = tmp_path / "bots.out"
        self.stdout = open(self.stdout_path, "w")
        self.lines: list[str] = []
        self.running = threading.Event()
        cmd = [str(bots_binary()), "run", *args, "--quiet", "--json", str(self.report)]
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self.stdout, stderr=subprocess.PIPE, text=True)
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        for line in self.proc.stderr:
            self.lines.append(line.rstrip("\n"))
            if " bots ready after " in line:
                self.running.set()
        self.running.set()  # EOF: wake the waiter, it checks why

    def wait_running(self, timeout: float) -> None:
        assert self.running.wait(timeout), f"bots not running within {timeout}s:\n{self.detail()}"
        assert self.proc.poll() is None, f"bots exited before running:\n{self.detail()}"
        assert any(" bots ready after " in l for l in self.lines), self.detail()

    def finish(self, timeout: float) -> tuple[subprocess.CompletedProcess, dict]:
        try:
            self.proc.wait(timeout=timeout)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(timeout=5)
            self.reader.join(timeout=5)
            self.stdout.close()
        out = self.stdout_path.read_text()
        done = subprocess.CompletedProcess(self.proc.args, self.proc.returncode, out, "\n".join(self.lines))
        assert self.report.exists(), f"no report:\n{self.detail()}"
        return done, json.loads(self.report.read_text())

    def detail(self) -> str:
        out = self.stdout_path.read_text() if self.stdout_path.exists() else ""
        return "stdout:\n" + out + "\nstderr:\n" + "\n".join(self.lines)


@pytest.mark.parametrize("how", ["kill", "drain", "pause", "pause-past-grace"])
def test_bots_survive_a_node_lost_mid_run(cluster, tmp_path, how):
    """kill: SIGKILL, the node is declared dead after --node-timeout (its
    sockets end without a close frame). drain: SIGTERM, its clients get 1001
    and resume elsewhere; the node is gone, not dead. pause: SIGSTOP until the
    cluster declared it dead, then SIGCONT: it closes its clients with 1012
    and rejoins; past grace, its users were timed out meanwhile and join
    afresh (§12)."""
    nodes = [cluster.node(*NODE_FLAGS) for _ in range(3)]
    victim, survivors = nodes[0], nodes[1:]
    urls = [a for n in nodes for a in ("--url", n.ws + "/v1/ws")]
    bots = BotsRun(tmp_path, "failover", "--dev", *urls)
    try:
        bots.wait_running(READY_TIMEOUT_S)
        if how == "kill":
            victim.kill()
        elif how == "drain":
            victim.signal(signal.SIGTERM)
        else:
            # Paused past --node-timeout, the node is declared dead; when it
            # runs again it learns so from the log, closes its sockets with 1012
            # and rejoins (§12). Its dozen users turn lost at once at the death
            # (the replicated counter on a survivor shows it; the run's own
            # `abrupt` drops add about one a second, far fewer in this bound).
            before = counter(survivors[0], "relay_participants_lost_total")
            timed_out = counter(survivors[0], "relay_participants_timed_out_total")
            victim.signal(signal.SIGSTOP)
            _wait(lambda: counter(survivors[0], "relay_participants_lost_total") >= before + 10,
                  1.5 + 2 + 3, "the paused node's users lost")
            if how == "pause-past-grace":
                # Asleep until grace has run out for them too: they come back
                # to a relay that forgot them (resumed: false, fresh join, §8).
                # Grace (10 s) plus generous slack: on a loaded 2-core machine the
                # nodes, the bots and Redis compete for the cores. Half of its dozen
                # users: during those 10 s the run's `abrupt`, `vanish` and `churn`
                # behaviours move a few of them to another node, where they resume
                # within grace (a threshold of 10 failed about one run in five);
                # nothing else in this run outlives grace, so any time-out is the
                # pause's.
                _wait(lambda: counter(survivors[0], "relay_participants_timed_out_total") >= timed_out + 6,
                      10 + 15, "the paused node's users timed out")
            victim.signal(signal.SIGCONT)
        proc, report = bots.finish(RUN_TIMEOUT_S)
    except BaseException:
        if bots.proc.poll() is None:
            bots.proc.kill()
            bots.proc.wait(timeout=5)
        raise
    print(proc.stdout)  # the report table, shown with -s
    detail = bots.detail() + "".join(f"\n--- {n.name} log:\n{n.output()}" for n in survivors)
    assert_clean(proc, report, detail)
    assert report["bots"] == 36, detail
    assert report["urls"] == [n.ws + "/v1/ws" for n in nodes], detail
    # The lost node's third of the bots (12, give or take the few that the
    # scenario's own drops moved meanwhile) came back elsewhere, and resumed.
    assert report["reconnects"] >= 9, detail
    if how == "pause-past-grace":
        # Those that timed out (at least 6, above) join afresh.
        assert report["freshRejoins"] >= 6, detail
    else:
        assert report["resumedTrue"] >= 9, detail
    assert report["unresolvedLost"] == 0, detail
    assert report["checks"]["seq-continuity"]["checked"] > 0, detail
    assert report["checks"]["lost-resolution"]["failures"] == 0, detail
    for n in survivors:
        assert n.readyz() == 200, f"{n.name} not ready after the failover:\n{n.output()}"
    if how == "drain":
        assert victim.proc.wait(timeout=15) == 0, victim.output()
    if how.startswith("pause"):
        assert "declared dead by the cluster: rejoining" in victim.output(), victim.output()
        victim.wait_ready(timeout=10)


def test_bots_survive_redis_losing_its_data(cluster, tmp_path):
    """§12: a Redis restarted empty (here FLUSHALL) resets the sessions: every
    node closes its clients with 1012, their resumes find nothing (`resumed:
    false`), they join afresh and `seq` starts again — never a crash or a
    wrong seq. The bots note the reset sessions and do not count their
    deliveries (two numberings in one ledger); every other check holds."""
    nodes = [cluster.node(*NODE_FLAGS) for _ in range(3)]
    urls = [a for n in nodes for a in ("--url", n.ws + "/v1/ws")]
    bots = BotsRun(tmp_path, "failover", "--dev", *urls)
    try:
        bots.wait_running(READY_TIMEOUT_S)
        assert cluster.redis.command("FLUSHALL") == "+OK"
        proc, report = bots.finish(RUN_TIMEOUT_S)
    except BaseException:
        if bots.proc.poll() is None:
            bots.proc.kill()
            bots.proc.wait(timeout=5)
        raise
    print(proc.stdout)  # the report table, shown with -s
    detail = bots.detail() + "".join(f"\n--- {n.name} log:\n{n.output()}" for n in nodes)
    assert proc.returncode == 0, detail
    for name, check in report["checks"].items():
        assert check["failures"] == 0, f"{name}: {check['samples']}"
    assert report["freshRejoins"] >= 30, detail
    assert any("restarted its seq" in n for n in report["notes"]), detail
    assert report["unresolvedLost"] == 0, detail
    for n in nodes:
        assert n.readyz() == 200, f"{n.name} not ready after the reset:\n{n.output()}"
