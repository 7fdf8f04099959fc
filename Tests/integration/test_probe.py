"""`relay probe`: the image's health check (docker/Dockerfile), a GET that
exits 0 on 200 and 1 on anything else, with the reason on stdout."""
from __future__ import annotations

import os
import subprocess

from conftest import free_port, relay_binary


def probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if not k.startswith("RELAY_")}
    full_env.update(env or {})
    return subprocess.run([relay_binary(), "probe", *args], env=full_env, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True, timeout=30)


def test_probe_ready_relay_exits_zero(relay):
    assert probe(f"{relay.http}/readyz").returncode == 0
    # Without a URL: /readyz of RELAY_LISTEN, a wildcard asked on loopback.
    assert probe(env={"RELAY_LISTEN": f"127.0.0.1:{relay.port}"}).returncode == 0
    assert probe(env={"RELAY_LISTEN": f"0.0.0.0:{relay.port}"}).returncode == 0


def test_probe_not_ready_or_not_found_exits_one(relay_factory):
    # A cluster node whose Redis is not there is alive but not ready (§12): 503.
    node = relay_factory("--redis", f"redis://127.0.0.1:{free_port()}")
    p = probe(f"{node.http}/readyz")
    assert p.returncode == 1 and "status 503" in p.stdout, p.stdout
    p = probe(f"{node.http}/no-such-page")
    assert p.returncode == 1 and "status 404" in p.stdout, p.stdout


def test_probe_nothing_listening_or_bad_url_exits_one():
    p = probe(f"http://127.0.0.1:{free_port()}/readyz", "--timeout", "1000")
    assert p.returncode == 1 and "/readyz" in p.stdout, p.stdout
    p = probe("ftp://127.0.0.1:1/readyz")
    assert p.returncode == 1 and "ftp://" in p.stdout, p.stdout
    p = probe("https://127.0.0.1:1/readyz", "--timeout", "1000")  # https is fine; nothing answers
    assert p.returncode == 1 and "/readyz" in p.stdout, p.stdout
