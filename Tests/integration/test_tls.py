"""TLS on the relay's listener (protocol/ §1, `--tls-cert` / `--tls-key`): real
clients over wss:// and https://, protocol versions and ALPN checked with
`openssl s_client`, and the faults: plain HTTP to the TLS port, a stalled or
truncated handshake, TLS records split byte by byte, a certificate reload under
load and a bad reload. The RFC 6455 cases over TLS are test_ws_conformance_tls.py."""
from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import time
from pathlib import Path

import pytest
import websockets

from tlsutil import client_context, make_pair

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="module")
def pairs(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    return {"ec": make_pair(d, "ec", "ec"), "rsa": make_pair(d, "rsa", "rsa"), "other": make_pair(d, "other", "ec")}


def tls_relay(relay_factory, pair, *flags):
    cert, key = pair
    return relay_factory("--tls-cert", str(cert), "--tls-key", str(key), *flags, tls_ca=cert)


def metric(relay, name: str, label: str | None = None) -> float:
    with relay.urlopen(relay.http + "/metrics") as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name) and (label is None or label in line):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def wait_metric(relay, name, label, value, timeout=5.0):
    deadline = time.monotonic() + timeout
    while metric(relay, name, label) < value:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{name}{{{label}}} < {value}")
        await asyncio.sleep(0.05)  # counters have no event to await


async def hello(relay, uid: str, ca: Path):
    ws = await websockets.connect(relay.ws + "/v1/ws", subprotocols=["relay.v1"], ssl=client_context(ca))
    await ws.send(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}))
    assert json.loads(await asyncio.wait_for(ws.recv(), 5))["type"] == "welcome"
    return ws


@pytest.mark.parametrize("kind", ["ec", "rsa"])
async def test_python_websockets_over_wss_and_https_endpoints(relay_factory, pairs, kind):
    relay = tls_relay(relay_factory, pairs[kind])
    ws = await hello(relay, "alice", pairs[kind][0])
    await ws.send(json.dumps({"type": "session.join", "id": "j", "session": "s"}))
    assert json.loads(await ws.recv()) == {"type": "ok", "re": "j"}
    assert json.loads(await ws.recv())["type"] == "session.joined"
    await ws.close()
    curl = subprocess.run(["curl", "-sS", "--cacert", str(pairs[kind][0]), relay.http + "/healthz"],
                          capture_output=True, text=True, timeout=20)
    assert curl.returncode == 0 and curl.stdout == "ok", curl.stderr
    assert metric(relay, "relay_tls_handshakes_total") >= 2


def test_node_ws_over_wss(relay_factory, pairs):
    node = shutil.which("node") or shutil.which("nodejs")
    assert node, "node is installed by scripts/install-deps.sh --test"
    relay = tls_relay(relay_factory, pairs["ec"])
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs", RELAY_WSS=relay.ws, RELAY_CA=str(pairs["ec"][0]))
    proc = subprocess.run([node, str(HERE / "node" / "wss_client.js")], env=env, capture_output=True, text=True,
                          timeout=30)
    assert proc.returncode == 0, proc.stderr + proc.stdout
    assert json.loads(proc.stdout)["protocol"] == "relay.v1"


def s_client(port: int, *args: str) -> str:
    proc = subprocess.run(["openssl", "s_client", "-connect", f"127.0.0.1:{port}", *args], input="",
                          capture_output=True, text=True, timeout=20)
    return proc.stdout + proc.stderr


def test_versions_and_alpn(relay_factory, pairs):
    relay = tls_relay(relay_factory, pairs["ec"])
    old = s_client(relay.port, "-tls1_1")
    assert "alert protocol version" in old or "no protocols available" in old or "wrong version" in old, old
    modern = s_client(relay.port, "-tls1_3", "-alpn", "http/1.1")
    assert "Protocol  : TLSv1.3" in modern or "TLSv1.3" in modern, modern
    assert "ALPN protocol: http/1.1" in modern, modern
    tls12 = s_client(relay.port, "-tls1_2", "-cipher", "ECDHE-ECDSA-AES128-GCM-SHA256")
    assert "TLSv1.2" in tls12, tls12
    legacy = s_client(relay.port, "-tls1_2", "-cipher", "AES128-SHA")  # no forward secrecy, no AEAD
    assert "handshake failure" in legacy or "no cipher" in legacy or "alert" in legacy, legacy


async def test_plain_http_stalls_and_truncation_close_only_that_connection(relay_factory, pairs):
    relay = tls_relay(relay_factory, pairs["ec"], "--hello-timeout", "1000")
    canary = await hello(relay, "canary", pairs["ec"][0])
    await canary.send(json.dumps({"type": "session.join", "id": "j", "session": "c"}))
    # Plain HTTP to the TLS port: closed, counted.
    with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as s:
        s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        data = s.recv(4096)
        while data and not data.startswith(b"\x15"):
            data = s.recv(4096)
    await wait_metric(relay, "relay_tls_handshake_failures_total", 'reason="plain_http"', 1)
    # A peer that connects and says nothing, and one that stops mid-ClientHello.
    silent = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    half = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    half.sendall(b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03")
    for s in (silent, half):
        s.settimeout(5)
        assert s.recv(4096) == b""  # closed by the relay after --hello-timeout
        s.close()
    await wait_metric(relay, "relay_tls_handshake_failures_total", 'reason="timeout"', 2)
    # Garbage.
    with socket.create_connection(("127.0.0.1", relay.port), timeout=5) as s:
        s.sendall(bytes(range(256)) * 4)
        s.settimeout(5)
        while s.recv(4096):
            pass
    # The canary never noticed.
    await canary.send(json.dumps({"type": "message.send", "session": "c", "data": 1}))
    types = [json.loads(await asyncio.wait_for(canary.recv(), 5))["type"] for _ in range(3)]
    assert types == ["ok", "session.joined", "message"]
    assert relay.proc.poll() is None


def test_tls_records_split_byte_by_byte(relay_factory, pairs):
    """Python's TLS over memory BIOs, every byte of the handshake and of the
    WebSocket upgrade sent in its own segment."""
    relay = tls_relay(relay_factory, pairs["ec"])
    ctx = client_context(pairs["ec"][0])
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(incoming, outgoing, server_hostname="localhost")
    sock = socket.create_connection(("127.0.0.1", relay.port), timeout=5)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def flush():
        data = outgoing.read()
        for i in range(len(data)):
            sock.sendall(data[i:i + 1])

    def pump_until(done):
        while not done():
            flush()
            chunk = sock.recv(65536)
            assert chunk, "relay closed the connection"
            incoming.write(chunk)

    def handshake_done():
        try:
            tls.do_handshake()
            return True
        except ssl.SSLWantReadError:
            return False

    pump_until(handshake_done)
    tls.write(b"GET /v1/ws HTTP/1.1\r\nHost: localhost\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
              b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
              b"Sec-WebSocket-Protocol: relay.v1\r\n\r\n")
    response = bytearray()

    def got_head():
        try:
            response.extend(tls.read(65536))
        except ssl.SSLWantReadError:
            pass
        return b"\r\n\r\n" in response

    pump_until(got_head)
    assert response.startswith(b"HTTP/1.1 101"), bytes(response)
    assert b"s3pPLMBiTxaQ9kYGzzhZRbK+xOo=" in response
    sock.close()


async def test_certificate_reload_under_load(relay_factory, pairs, tmp_path):
    cert, key = tmp_path / "live.crt", tmp_path / "live.key"
    shutil.copy(pairs["ec"][0], cert)
    shutil.copy(pairs["ec"][1], key)
    both = tmp_path / "both.pem"  # probes trust the old and the new certificate
    both.write_bytes(pairs["ec"][0].read_bytes() + pairs["other"][0].read_bytes())
    relay = relay_factory("--tls-cert", str(cert), "--tls-key", str(key), tls_ca=both)
    members = [await hello(relay, f"u{i}", pairs["ec"][0]) for i in range(4)]
    for i, m in enumerate(members):
        await m.send(json.dumps({"type": "session.join", "id": "j", "session": "load"}))
    stop = asyncio.Event()

    async def talk(ws):
        n = 0
        while not stop.is_set():
            await ws.send(json.dumps({"type": "message.send", "session": "load", "data": n}))
            n += 1
            await asyncio.sleep(0.02)  # paces the load; not a synchronisation

    async def drain(ws):
        while not stop.is_set():
            try:
                await asyncio.wait_for(ws.recv(), 0.2)
            except asyncio.TimeoutError:
                pass

    tasks = [asyncio.create_task(f(m)) for m in members for f in (talk, drain)]
    # A new pair, then SIGHUP: new connections get it, old ones keep going.
    shutil.copy(pairs["other"][0], cert)
    shutil.copy(pairs["other"][1], key)
    relay.proc.send_signal(signal.SIGHUP)
    await wait_metric(relay, "relay_tls_reloads_total", None, 1)
    fresh = await hello(relay, "fresh", pairs["other"][0])
    with pytest.raises(ssl.SSLCertVerificationError):
        await hello(relay, "stale", pairs["ec"][0])
    # A bad pair (key of another certificate): refused, the current one stays.
    shutil.copy(pairs["rsa"][1], key)
    relay.proc.send_signal(signal.SIGHUP)
    await wait_metric(relay, "relay_tls_reload_failures_total", None, 1)
    again = await hello(relay, "again", pairs["other"][0])
    stop.set()
    await asyncio.gather(*tasks)
    for m in members:
        assert m.close_code is None, "a connection was dropped by the reload"
        await m.close()
    await fresh.close()
    await again.close()


def test_bad_files_refuse_to_start(tmp_path, pairs):
    from conftest import free_port, relay_binary

    mismatched = subprocess.run(
        [relay_binary(), "serve", "--listen", f"127.0.0.1:{free_port()}", "--tls-cert", str(pairs["ec"][0]),
         "--tls-key", str(pairs["rsa"][1])], capture_output=True, text=True, timeout=20)
    assert mismatched.returncode != 0 and "key" in (mismatched.stdout + mismatched.stderr).lower()
    alone = subprocess.run([relay_binary(), "serve", "--tls-cert", str(pairs["ec"][0])],
                           capture_output=True, text=True, timeout=20)
    assert alone.returncode != 0 and "--tls-key" in alone.stdout + alone.stderr
    public = subprocess.run(
        [relay_binary(), "serve", "--listen", f"0.0.0.0:{free_port()}", "--tls-cert", str(pairs["ec"][0]),
         "--tls-key", str(pairs["ec"][1])], capture_output=True, text=True, timeout=20)
    assert public.returncode != 0, "dev mode must stay loopback-only with TLS too"
