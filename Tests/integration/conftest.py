"""Shared fixtures: start the real `relay` binary on a free loopback port.

Every test talks to a real process over real sockets. The binary is taken from
RELAY_BIN, else from .build/debug/relay (built by `make test` beforehand).
"""
from __future__ import annotations

import os
import socket
import ssl
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
START_TIMEOUT_S = 20.0


def relay_binary() -> str:
    env = os.environ.get("RELAY_BIN")
    if env:
        return env
    for build in ("release", "debug"):
        p = ROOT / ".build" / build / "relay"
        if p.exists():
            return str(p)
    raise RuntimeError("relay binary not found: run `swift build` or set RELAY_BIN")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RelayProcess:
    """A running `relay serve` process on 127.0.0.1:<port>."""

    def __init__(self, args: list[str], env: dict[str, str] | None = None, tls_ca=None):
        self.tls_ca = tls_ca  # a TLS relay (`--tls-cert`): probes and URLs use https/wss
        self.port = free_port()
        self.args = [relay_binary(), "serve", "--listen", f"127.0.0.1:{self.port}", *args]
        full_env = dict(os.environ)
        full_env.pop("RELAY_SECRET", None)
        full_env.pop("RELAY_ADMIN_KEY", None)
        full_env.update(env or {})
        self.proc = subprocess.Popen(
            self.args, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=full_env
        )
        self._wait_healthy()

    @property
    def http(self) -> str:
        return f"{'https' if self.tls_ca else 'http'}://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"{'wss' if self.tls_ca else 'ws'}://127.0.0.1:{self.port}"

    def urlopen(self, url_or_request, timeout: float = 5):
        """urllib's urlopen, trusting the relay's certificate when it speaks TLS."""
        context = ssl.create_default_context(cafile=str(self.tls_ca)) if self.tls_ca else None
        return urllib.request.urlopen(url_or_request, timeout=timeout, context=context)

    def _wait_healthy(self) -> None:
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                out = self.proc.stdout.read().decode(errors="replace") if self.proc.stdout else ""
                raise RuntimeError(f"relay exited early ({self.proc.returncode}):\n{out}")
            try:
                with self.urlopen(self.http + "/healthz", timeout=1) as r:
                    if r.status == 200:
                        return
            except OSError:
                time.sleep(0.05)  # polling a port that is not open yet: no event to await
        self.stop()
        raise RuntimeError("relay did not become healthy in time")

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        if self.proc.stdout:
            self.proc.stdout.close()
        return self.proc.returncode


@pytest.fixture
def relay_factory():
    """Start relays with custom flags; all are stopped at the end of the test."""
    started: list[RelayProcess] = []

    def start(*args: str, env: dict[str, str] | None = None, tls_ca=None) -> RelayProcess:
        r = RelayProcess(list(args), env, tls_ca)
        started.append(r)
        return r

    yield start
    for r in started:
        r.stop()


@pytest.fixture
def echo_relay(relay_factory) -> RelayProcess:
    """A dev-mode relay with /v1/echo enabled."""
    return relay_factory("--echo")


@pytest.fixture
def relay(relay_factory) -> RelayProcess:
    """A dev-mode relay with default settings."""
    return relay_factory()
