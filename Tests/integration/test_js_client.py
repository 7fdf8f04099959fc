"""The JavaScript client and the demo page's HTTP side.

- `node --test clients/js/test/` against real relays (defaults, short timers,
  short idle timeout), so one runner reports the Node tests too.
- GET /demo serves the files embedded at build time (Plugins/EmbedDemoPlugin)
  byte for byte, equal to demo/ and clients/js/ on disk; it is on in dev mode,
  off with --secret unless --demo, and --no-demo / RELAY_DEMO=0 turn it off.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.error
import urllib.request

import pytest

import conftest
from conftest import ROOT

NODE_TIMEOUT_S = 240  # each Node test is bounded too (30 s); this catches a runner that hangs
SECRET = "js-client-test-secret-0123456789abcdef"


def get(url: str) -> tuple[int, dict[str, str], bytes]:
    try:
        with urllib.request.urlopen(url, timeout=10) as r:
            return r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        return e.code, dict(e.headers), e.read()


@pytest.mark.timeout(NODE_TIMEOUT_S + 60)
def test_node_client_against_the_relay(relay_factory):
    node = shutil.which("node")
    if node is None:
        message = "node missing: run scripts/install-deps.sh --test"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    plain = relay_factory()
    short = relay_factory("--grace", "1500", "--heartbeat-interval", "300", "--ring-timeout", "600")
    idle = relay_factory("--idle-timeout", "400")
    env = dict(os.environ)
    env.update(
        RELAY_URL=f"{plain.ws}/v1/ws",
        RELAY_URL_SHORT=f"{short.ws}/v1/ws",
        RELAY_URL_IDLE=f"{idle.ws}/v1/ws",
        NODE_PATH=os.pathsep.join(p for p in (env.get("NODE_PATH"), "/usr/share/nodejs") if p),
    )
    npm = shutil.which("npm")
    assert npm, "npm missing: run scripts/install-deps.sh --test"
    run = subprocess.run(
        # The package's own `test` script (clients/js/package.json): node --test test/*.test.mjs.
        [npm, "test", "--silent"], cwd=ROOT / "clients/js", env=env, capture_output=True, text=True,
        timeout=NODE_TIMEOUT_S,
    )
    summary = [line for line in run.stdout.splitlines() if line.startswith("# ")]
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    assert "# fail 0" in summary and "# skipped 0" in summary, summary


def test_node_client_across_a_relay_restart(relay_factory, monkeypatch):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node missing") if os.environ.get("CI") != "true" else pytest.fail("node missing")
    first = relay_factory()
    script = ROOT / "Tests" / "integration" / "node" / "js_client_restart.mjs"
    proc = subprocess.Popen([node, str(script), f"{first.ws}/v1/ws"], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip().endswith("ready")  # blocks until joined (script deadline 30 s)
        assert first.stop() == 0  # SIGTERM: drain, every WebSocket closed with 1001
        monkeypatch.setattr(conftest, "free_port", lambda: first.port)  # the same address again
        relay_factory()
        out, _ = proc.communicate(timeout=40)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, out
    events = [json.loads(line) for line in out.splitlines()]
    assert events[0] == {"type": "connectionlost", "code": 1001, "reason": "server going away", "willReconnect": True}
    assert events[1]["type"] == "reconnecting"
    assert {"type": "connectionrestored", "resumed": False} in events
    rejoined = [e for e in events if e["type"] == "sessionjoined"]
    assert len(rejoined) == 1 and rejoined[0]["recovered"] is False, events


def test_demo_served_from_the_binary(relay):
    status, headers, body = get(f"{relay.http}/demo")
    assert status == 200 and headers["Content-Type"].startswith("text/html")
    assert b'<script type="module" src="/demo/demo.js">' in body
    # Every file of demo/ and the client: one added to demo/ but not to the plugin's list fails here.
    served = [("relay-client.js", "clients/js/relay-client.js")]
    served += [(p.name, f"demo/{p.name}") for p in sorted((ROOT / "demo").iterdir()) if p.is_file()]
    assert {"demo.js", "demo.css", "index.html"} <= {name for name, _ in served}
    for name, source in served:
        status, headers, body = get(f"{relay.http}/demo/{name}")
        assert status == 200, name
        assert body == (ROOT / source).read_bytes(), f"/demo/{name} differs from {source}: rebuild the relay"
    _, headers, _ = get(f"{relay.http}/demo/relay-client.js")
    assert headers["Content-Type"].startswith("text/javascript"), "an ES module needs a JS MIME type"
    assert get(f"{relay.http}/demo/nope.js")[0] == 404
    assert get(f"{relay.http}/demo/a/b")[0] == 404


@pytest.mark.parametrize(
    "args, env, expected",
    [
        (["--secret", SECRET], {}, 404),
        (["--secret", SECRET, "--demo"], {}, 200),
        (["--secret", SECRET], {"RELAY_DEMO": "1"}, 200),
        (["--no-demo"], {}, 404),
        ([], {"RELAY_DEMO": "0"}, 404),
    ],
)
def test_demo_switch(relay_factory, args, env, expected):
    relay = relay_factory(*args, env=env)
    assert get(f"{relay.http}/demo")[0] == expected
