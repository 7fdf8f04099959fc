"""A relay with `--data-dir` (contract §12a) that the tests stop and start again.

Each process logs to a file in the test's temp dir (read on failure), is started
with the test's own limits (`preexec_fn`: a file-size limit for the disk-full test,
never a system setting) and is stopped by its PID.
"""
from __future__ import annotations

import signal
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

from conftest import free_port, relay_binary

START_TIMEOUT_S = 20.0


class DurableRelay:
    """`relay serve --data-dir DIR …` on a free loopback port."""

    def __init__(self, data_dir: Path, *args: str, env: dict | None = None, preexec_fn=None,
                 port: int | None = None, wait: bool = True):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.log_path = data_dir.parent / f"relay-{self.port}-{time.monotonic_ns()}.log"
        self.args = [relay_binary(), "serve", "--listen", f"127.0.0.1:{self.port}", "--data-dir", str(data_dir), *args]
        import os
        full_env = dict(os.environ)
        for k in list(full_env):
            if k.startswith("RELAY_"):
                full_env.pop(k)
        full_env.update(env or {})
        self.log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=full_env,
                                     preexec_fn=preexec_fn)
        if wait:
            self.wait_ready()

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def output(self) -> str:
        if not self.log.closed:
            self.log.flush()
        return self.log_path.read_text(errors="replace")

    def status(self, path: str) -> int:
        try:
            with urllib.request.urlopen(self.http + path, timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def metric(self, name: str) -> float:
        with urllib.request.urlopen(self.http + "/metrics", timeout=5) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise KeyError(name)

    def wait_snapshots(self, count: int, timeout: float = 10.0) -> None:
        """Snapshots are written off the loop: wait until `count` are durable."""
        wait_for(lambda: self.metric("relay_data_dir_snapshots_total") >= count, timeout, f"{count} snapshot(s)")

    def wait_ready(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"relay exited early ({self.proc.returncode}):\n{self.output()}")
            try:
                if self.status("/readyz") == 200:
                    return
            except OSError:
                pass
            time.sleep(0.05)  # polling a port that is not open yet: no event to await
        self.kill()
        raise RuntimeError(f"relay not ready in time:\n{self.output()}")

    def wait_exit(self, timeout: float = 15.0) -> int:
        code = self.proc.wait(timeout=timeout)
        self.log.close()
        return code

    def kill(self) -> None:
        """SIGKILL: a crash, nothing flushed or synced by the relay."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
        self.wait_exit()

    def terminate(self) -> int:
        """SIGTERM: the drain (§13), then exit."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        return self.wait_exit()


def wait_for(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # polling an HTTP endpoint: there is no event to await
    raise TimeoutError(f"{what} not within {timeout}s")
