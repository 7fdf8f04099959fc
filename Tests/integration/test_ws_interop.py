"""Interop of the relay's WebSocket layer with real clients and real sockets.

- Python `websockets` (asyncio client) and Node `ws` (node/echo_client.js)
  against `GET /v1/echo`: size matrix, fragmented sends, ping/pong, close codes.
- A slow reader is dropped (4008 / TCP close) while another client is served.
- Subprotocol and version negotiation on `GET /v1/ws`.
- Graceful shutdown on SIGTERM: close 1001, /readyz 503 while draining, exit 0
  within --drain-timeout.
"""
from __future__ import annotations

import asyncio
import inspect
import json
import os
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

import pytest
from websockets.asyncio.client import connect as ws_connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

import wsraw
from wsraw import OP_BINARY, OP_CLOSE, OP_TEXT, RawClient, ReadTimeout, build_frame

HERE = Path(__file__).resolve().parent
BIG_LIMIT = 2 * 1024 * 1024
STEP_S = 10.0  # bound on one client operation


# `proxy` (websockets ≥ 15) would otherwise pick up a proxy from the environment.
_NO_PROXY = {"proxy": None} if "proxy" in inspect.signature(ws_connect.__init__).parameters else {}


def client(url: str, **kw):
    kw.update(_NO_PROXY)
    kw.setdefault("max_size", 4 * 1024 * 1024)
    kw.setdefault("open_timeout", STEP_S)
    kw.setdefault("close_timeout", STEP_S)
    kw.setdefault("ping_interval", None)
    return ws_connect(url, **kw)


@pytest.fixture
def big_echo(relay_factory):
    return relay_factory("--echo", "--max-message-bytes", str(BIG_LIMIT))


def text_of(n: int) -> str:
    unit = "abcdefghij0123456789 \u00fc\u20ac\U0001d11e"  # 30 bytes of UTF-8
    return unit * (n // 30) + "x" * (n % 30)


# ----------------------------------------------------- Python `websockets`
SIZES = [0, 1, 125, 126, 65535, 65536, 1 << 20]


@pytest.mark.parametrize("size", SIZES)
@pytest.mark.parametrize("kind", ["text", "binary"])
async def test_websockets_echo_sizes(big_echo, kind, size):
    msg = text_of(size) if kind == "text" else os.urandom(size)
    if kind == "text":
        assert len(msg.encode()) == size
    async with client(big_echo.ws + "/v1/echo") as ws:
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None, "no extension may be negotiated"
        await ws.send(msg)
        got = await asyncio.wait_for(ws.recv(), STEP_S)
        assert type(got) is type(msg) and got == msg


@pytest.mark.parametrize("kind", ["text", "binary"])
async def test_websockets_echo_1mib_with_raised_outbound_cap(relay_factory, kind):
    # Same as the 1 MiB case above with room for the echo frame in the outbound
    # queue: tells a frame-layer failure from the outbound cap's accounting.
    relay = relay_factory("--echo", "--max-message-bytes", str(BIG_LIMIT), "--max-outbound-bytes", str(4 * BIG_LIMIT))
    msg = text_of(1 << 20) if kind == "text" else os.urandom(1 << 20)
    async with client(relay.ws + "/v1/echo") as ws:
        await ws.send(msg)
        assert await asyncio.wait_for(ws.recv(), STEP_S) == msg


async def test_websockets_many_sizes_on_one_connection(big_echo):
    async with client(big_echo.ws + "/v1/echo") as ws:
        for size in [0, 1, 125, 126] + list(range(120, 132)) + list(range(65530, 65540)) + [300000]:
            for msg in (text_of(size), os.urandom(size)):
                await ws.send(msg)
                assert await asyncio.wait_for(ws.recv(), STEP_S) == msg, f"size {size}"


async def test_websockets_fragmented_send(big_echo):
    async with client(big_echo.ws + "/v1/echo") as ws:
        parts = ["alpha ", "\u00fc\u20ac ", "", "\U0001d11e omega"]
        await ws.send(parts)
        assert await asyncio.wait_for(ws.recv(), STEP_S) == "".join(parts)
        bparts = [os.urandom(1000) for _ in range(50)]
        await ws.send(bparts)
        assert await asyncio.wait_for(ws.recv(), STEP_S) == b"".join(bparts)

        async def agen():
            for i in range(5):
                yield f"chunk{i};"
        await ws.send(agen())
        assert await asyncio.wait_for(ws.recv(), STEP_S) == "".join(f"chunk{i};" for i in range(5))


async def test_websockets_fragmented_send_up_to_1mib(big_echo):
    async with client(big_echo.ws + "/v1/echo") as ws:
        parts = [os.urandom(64 * 1024) for _ in range(16)]
        await ws.send(parts)
        assert await asyncio.wait_for(ws.recv(), STEP_S) == b"".join(parts)


async def test_websockets_ping_pong(echo_relay):
    async with client(echo_relay.ws + "/v1/echo") as ws:
        for payload in (b"", b"python-ping", bytes(range(125))):
            waiter = await ws.ping(payload)
            await asyncio.wait_for(waiter, STEP_S)
        waiters = [await ws.ping(b"p%d" % i) for i in range(10)]
        await asyncio.wait_for(asyncio.gather(*waiters), STEP_S)


@pytest.mark.parametrize("code", [1000, 1001, 3000, 4000, 4999])
async def test_websockets_close_code_round_trip(echo_relay, code):
    async with client(echo_relay.ws + "/v1/echo") as ws:
        await ws.send("before close")
        assert await asyncio.wait_for(ws.recv(), STEP_S) == "before close"
        await asyncio.wait_for(ws.close(code, "py bye"), STEP_S)
        rcvd = ws.protocol.close_rcvd
        assert rcvd is not None, "server did not answer the close frame"
        assert rcvd.code == code


async def test_websockets_too_big_closed_1009(echo_relay):
    async with client(echo_relay.ws + "/v1/echo") as ws:
        await ws.send(b"x" * 65537)
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), STEP_S)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1009


async def test_websockets_many_concurrent_clients(echo_relay):
    async def one(i: int) -> None:
        async with client(echo_relay.ws + "/v1/echo") as ws:
            for j in range(20):
                msg = os.urandom((i * 37 + j * 101) % 4000) if j % 2 else text_of((i * 13 + j) % 3000)
                await ws.send(msg)
                assert await ws.recv() == msg, f"client {i} message {j}"
            await ws.close(1000)
            assert ws.protocol.close_rcvd is not None and ws.protocol.close_rcvd.code == 1000

    await asyncio.wait_for(asyncio.gather(*(one(i) for i in range(100))), 60)


# ------------------------------------------------------------- Node `ws`
NODE = shutil.which("node") or shutil.which("nodejs")


@pytest.mark.skipif(NODE is None, reason="node is not installed")
def test_node_ws_client(big_echo):
    script = HERE / "node" / "echo_client.js"
    env = dict(os.environ, NODE_PATH="/usr/share/nodejs", DEADLINE_MS="40000")
    proc = subprocess.run(
        [NODE, str(script), big_echo.ws + "/v1/echo", str(BIG_LIMIT)],
        capture_output=True, text=True, timeout=60, env=env)
    lines = [json.loads(l) for l in proc.stdout.splitlines() if l.startswith("{")]
    failed = [l for l in lines if l.get("ok") is False or "fatal" in l]
    assert proc.returncode == 0 and not failed, f"node ws client failed (rc {proc.returncode}): {failed}\n{proc.stderr}"
    checks = {l["check"] for l in lines if "check" in l}
    for required in ("text 1048576", "binary 1048576", "text 0", "binary 126", "fragmented text",
                     "ping/pong payload", "close code echoed", "no extension negotiated"):
        assert required in checks, f"node check {required!r} did not run"
    assert {"done": True} in lines


# ------------------------------------------------------------ slow reader
# 8 MiB of echoes to a client that reads nothing: more than the cap (256 KiB)
# plus any kernel buffering between the relay and the client (the relay's send
# buffer tops out at net.ipv4.tcp_wmem's 4 MiB). The relay may keep reading and
# discarding what the client sends after it has given up on it, so the sends
# themselves need not fail.
SLOW_MESSAGES = 128

def test_slow_reader_dropped_while_others_served(relay_factory):
    relay = relay_factory("--echo", "--max-outbound-bytes", "262144")
    slow = RawClient(relay.port, rcvbuf=4096)
    fast = wsraw.connect(relay.port)
    with slow, fast:
        slow.handshake("/v1/echo")
        frame = build_frame(OP_BINARY, os.urandom(65536))
        sent = 0
        send_failed = False
        worst = 0.0
        deadline = time.monotonic() + 30
        for i in range(SLOW_MESSAGES):
            if time.monotonic() > deadline:
                break
            slow.sock.settimeout(2.0)
            try:
                slow.sock.sendall(frame)
                sent += 1
            except (BrokenPipeError, ConnectionResetError):
                send_failed = True
                break
            except socket.timeout:
                break  # the server stopped reading from us; see below whether it drops us
            finally:
                slow.sock.settimeout(slow.timeout)
            # The other client is served promptly throughout.
            t0 = time.monotonic()
            fast.send_text(b"fast %d" % i)
            assert fast.recv_message(timeout=1.0) == (OP_TEXT, b"fast %d" % i)
            worst = max(worst, time.monotonic() - t0)
        # Drain the slow client: the stream must end with close 4008 or a TCP close.
        outcome = None
        drain_deadline = time.monotonic() + 10
        while outcome is None:
            try:
                f = slow.recv_frame(timeout=max(0.1, drain_deadline - time.monotonic()))
            except wsraw.ConnectionClosed as e:
                outcome = ("tcp", e.how)
                break
            except ReadTimeout:
                pytest.fail(f"slow reader (sent {sent} x 64 KiB, never read) was not dropped: "
                            f"connection still open and silent after draining")
            if f.opcode == OP_CLOSE:
                outcome = ("close", f.close_code)
                assert f.close_code == 4008, f"slow reader closed with {f.close_code}, expected 4008"
                # The client never answers: the relay must still let go of the socket.
                assert slow.is_closed_within(10.0), "relay kept the dropped slow reader's socket open"
            else:
                assert f.opcode == OP_BINARY
        # Still serving the fast client after the drop.
        fast.send_text("after drop")
        assert fast.recv_message(timeout=2.0) == (OP_TEXT, b"after drop")
        assert worst < 1.0, f"fast client waited {worst:.2f}s for an echo"
        fast.close_handshake(1000)
        print(f"slow reader: sent {sent} messages, send_failed={send_failed}, outcome={outcome}, "
              f"worst fast echo {worst * 1000:.1f} ms")
    assert relay.proc.poll() is None


def test_prompt_reader_is_not_a_slow_consumer(relay_factory):
    """The cap is on bytes *queued* (not yet taken by the kernel): a client that
    reads everything at once must never be closed with 4008, even when one echo
    frame (65 536 + 4 header bytes) is larger than --max-outbound-bytes."""
    relay = relay_factory("--echo", "--max-outbound-bytes", "65536")
    with wsraw.connect(relay.port) as c:
        for _ in range(5):
            data = os.urandom(65536)
            c.send_binary(data)
            try:
                got = c.recv_message(timeout=5.0)
            except wsraw.UnexpectedFrame as e:
                pytest.fail(f"prompt reader closed: {e}")
            assert got == (OP_BINARY, data)
        c.close_handshake(1000)


def relay_holds_connection_from(relay, peer_port: int) -> bool:
    """Does the relay process still own the socket of the connection from
    127.0.0.1:peer_port? (/proc/net/tcp gives the socket inode; the relay's fds
    name the inodes it holds.)"""
    inodes = set()
    with open("/proc/net/tcp") as f:
        for line in f.readlines()[1:]:
            cols = line.split()
            local_port = int(cols[1].split(":")[1], 16)
            remote_port = int(cols[2].split(":")[1], 16)
            if local_port == relay.port and remote_port == peer_port and cols[9] != "0":
                inodes.add(f"socket:[{cols[9]}]")
    fd_dir = f"/proc/{relay.proc.pid}/fd"
    for fd in os.listdir(fd_dir):
        try:
            if os.readlink(os.path.join(fd_dir, fd)) in inodes:
                return True
        except OSError:
            pass
    return False


def wait_released(relay, peer_port: int, timeout: float) -> bool:
    """Poll until the relay lets go of the connection (no event exists for this)."""
    deadline = time.monotonic() + timeout
    while relay_holds_connection_from(relay, peer_port):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_slow_reader_that_never_reads_is_released(relay_factory):
    """The dropped slow reader never reads a byte, never answers the close and
    keeps its socket open: the relay must still free the connection (its
    socket) within a bounded time while serving others."""
    relay = relay_factory("--echo", "--max-outbound-bytes", "262144")
    fast = wsraw.connect(relay.port)
    slow = RawClient(relay.port, rcvbuf=4096)
    with slow, fast:
        slow.handshake("/v1/echo")
        slow_port = slow.sock.getsockname()[1]
        assert relay_holds_connection_from(relay, slow_port)
        frame = build_frame(OP_BINARY, os.urandom(65536))
        for i in range(SLOW_MESSAGES):
            if not slow.send(frame, ignore_errors=True):
                break
            fast.send_text(b"f%d" % i)
            assert fast.recv_message(timeout=2.0) == (OP_TEXT, b"f%d" % i)
        assert wait_released(relay, slow_port, 15.0), "relay still holds the dropped slow reader's socket after 15 s"
        assert relay_holds_connection_from(relay, fast.sock.getsockname()[1])
        fast.send_text("after release")
        assert fast.recv_message(timeout=2.0) == (OP_TEXT, b"after release")
        fast.close_handshake(1000)


# -------------------------------------------- /v1/ws subprotocol and version
@pytest.mark.parametrize("offer", [["relay.v1"], ["foo", "relay.v1"], ["relay.v1", "bar"]], ids=lambda o: ",".join(o))
def test_v1_ws_selects_relay_v1(relay, offer):
    with wsraw.connect(relay.port, "/v1/ws", protocols=offer) as c:
        assert c.handshake_response.header("Sec-WebSocket-Protocol") == "relay.v1"
        c.close_handshake(1000)


@pytest.mark.parametrize("offer", [["foo"], ["foo", "bar"], ["relay.v2"]], ids=lambda o: ",".join(o))
def test_v1_ws_only_other_subprotocols_refused_400(relay, offer):
    with RawClient(relay.port) as c:
        resp = c.handshake("/v1/ws", protocols=offer, expect_status=400)
        assert resp.header("Sec-WebSocket-Accept") is None
    assert_still_serving(relay)


@pytest.mark.parametrize("version", ["12", "8", "14", "0"])
def test_v1_ws_wrong_version_426(relay, version):
    with RawClient(relay.port) as c:
        resp = c.handshake("/v1/ws", protocols=["relay.v1"], version=version, expect_status=426)
        versions = [v.strip() for h in resp.header_all("Sec-WebSocket-Version") for v in h.split(",")]
        assert "13" in versions, f"426 without Sec-WebSocket-Version: 13: {resp.raw_head!r}"
    assert_still_serving(relay)


async def test_v1_ws_websockets_client_gets_subprotocol(relay):
    async with client(relay.ws + "/v1/ws", subprotocols=["relay.v1"]) as ws:
        assert ws.subprotocol == "relay.v1"
        assert ws.response.headers.get("Sec-WebSocket-Extensions") is None


async def test_v1_ws_websockets_client_refused_without_relay_v1(relay):
    with pytest.raises(InvalidStatus) as info:
        async with client(relay.ws + "/v1/ws", subprotocols=["chat"]):
            pass
    assert info.value.response.status_code == 400


def assert_still_serving(relay) -> None:
    assert relay.proc.poll() is None, "relay exited"
    resp = wsraw.http_get(relay.port, "/healthz")
    assert resp.status == 200


# ------------------------------------------------------- graceful shutdown
def test_sigterm_closes_websockets_1001_and_exits_0(relay_factory):
    relay = relay_factory("--echo")
    a = wsraw.connect(relay.port)
    b = wsraw.connect(relay.port)
    with a, b:
        for c in (a, b):
            c.send_text("before shutdown")
            assert c.recv_message() == (OP_TEXT, b"before shutdown")
        t0 = time.monotonic()
        relay.proc.send_signal(signal.SIGTERM)
        a.expect_close(1001, timeout=5.0)  # replies, then requires the TCP close
        b.expect_close(1001, timeout=5.0)
    rc = relay.proc.wait(timeout=12)
    assert rc == 0, f"relay exited with {rc} after SIGTERM"
    assert time.monotonic() - t0 < 10.0 + 1.0


def test_sigterm_readyz_503_while_draining(relay_factory):
    relay = relay_factory("--echo")
    assert wsraw.http_get(relay.port, "/readyz").status == 200
    c = wsraw.connect(relay.port)
    with c:
        relay.proc.send_signal(signal.SIGTERM)
        f = c.recv_frame(timeout=5.0)
        assert (f.opcode, f.close_code) == (OP_CLOSE, 1001), f
        # We have not answered the close yet, so the relay is still draining.
        assert relay.proc.poll() is None, "relay exited without waiting for the close handshake"
        try:
            resp = wsraw.http_get(relay.port, "/readyz", timeout=3.0)
        except (ConnectionRefusedError, wsraw.ConnectionClosed) as e:
            pytest.fail(f"/readyz unreachable while draining ({e!r}); contract: 503 while draining")
        assert resp.status == 503, f"/readyz while draining: {resp.status}"
        c.send_close(1001)
        c.wait_tcp_close(timeout=5.0)
    assert relay.proc.wait(timeout=12) == 0


def test_sigterm_exits_within_drain_timeout_when_client_never_answers(relay_factory):
    relay = relay_factory("--echo", "--drain-timeout", "2000")
    c = wsraw.connect(relay.port)
    with c:
        c.auto_pong = False
        t0 = time.monotonic()
        relay.proc.send_signal(signal.SIGTERM)
        f = c.recv_frame(timeout=5.0)
        assert (f.opcode, f.close_code) == (OP_CLOSE, 1001), f
        # Never answer: the relay must give up after the drain timeout.
        rc = relay.proc.wait(timeout=2.0 + 3.0)
        elapsed = time.monotonic() - t0
        assert rc == 0, f"exit code {rc}"
        assert elapsed < 2.0 + 1.5, f"exit took {elapsed:.1f}s with --drain-timeout 2000"
        assert c.is_closed_within(2.0), "socket still open after the relay exited"


def test_sigterm_exit_not_held_by_finished_connections(relay_factory):
    """Connections whose close handshake is complete (the client merely keeps
    its socket open) must not hold the exit past --drain-timeout."""
    relay = relay_factory("--echo", "--drain-timeout", "500")
    done = [wsraw.connect(relay.port) for _ in range(3)]
    try:
        for c in done:
            c.close_handshake(1000)  # server answered and half-closed; we keep our end open
        t0 = time.monotonic()
        relay.proc.send_signal(signal.SIGTERM)
        try:
            rc = relay.proc.wait(timeout=5.0)
        except subprocess.TimeoutExpired:
            pytest.fail("relay still running 5 s after SIGTERM with --drain-timeout 500")
        elapsed = time.monotonic() - t0
        assert rc == 0
        assert elapsed < 0.5 + 0.5, f"exit took {elapsed:.2f}s after SIGTERM with --drain-timeout 500"
    finally:
        for c in done:
            c.close()


async def test_sigterm_websockets_client_sees_1001(relay_factory):
    relay = relay_factory("--echo")
    async with client(relay.ws + "/v1/echo") as ws:
        await ws.send("hi")
        assert await asyncio.wait_for(ws.recv(), STEP_S) == "hi"
        relay.proc.send_signal(signal.SIGTERM)
        with pytest.raises(ConnectionClosed) as info:
            await asyncio.wait_for(ws.recv(), STEP_S)
        assert info.value.rcvd is not None and info.value.rcvd.code == 1001
    rc = await asyncio.to_thread(relay.proc.wait, 12)
    assert rc == 0


def test_v1_ws_offer_split_over_header_lines(relay):
    # RFC 6455 §4.1 / RFC 9110 §5.3: the offer may come as several header lines.
    with wsraw.connect(relay.port, "/v1/ws", headers=[("Sec-WebSocket-Protocol", "foo"),
                                                      ("Sec-WebSocket-Protocol", "relay.v1")]) as c:
        assert c.handshake_response.header("Sec-WebSocket-Protocol") == "relay.v1"
        c.close_handshake(1000)


# ---------------------------------------------- /v1/ws frame-layer rules (§1)
def v1_ws(relay) -> RawClient:
    return wsraw.connect(relay.port, "/v1/ws", protocols=["relay.v1"])


def test_v1_ws_binary_message_closed_1003(relay):
    with v1_ws(relay) as c:
        c.send_binary(b'{"type":"hello"}')
        c.expect_close(1003)


def test_v1_ws_fragmented_hello_reassembled(relay):
    hello = json.dumps({"type": "hello", "id": "h1", "dev": {"uid": "frag-user", "name": "Fr\u00e4g"}}).encode()
    with v1_ws(relay) as c:
        parts = [hello[:5], hello[5:30], hello[30:]]
        for i, p in enumerate(parts):
            c.send_frame(OP_TEXT if i == 0 else wsraw.OP_CONT, p, fin=(i == len(parts) - 1))
        op, data = c.recv_message()
        assert op == OP_TEXT
        msg = json.loads(data)
        assert msg.get("type") == "welcome", msg
        c.close_handshake(1000)


def test_v1_ws_invalid_utf8_closed_1007(relay):
    with v1_ws(relay) as c:
        c.send_text(b'{"type":"hello","x":"\xed\xa0\x80"}')
        c.expect_close(1007)


def test_v1_ws_message_over_max_closed_1009(relay):
    with v1_ws(relay) as c:
        c.send_text(b'{"type":"hello","pad":"' + b"p" * 70000 + b'"}', ignore_errors=True)
        c.expect_close(1009)


def test_v1_ws_unmasked_closed_1002(relay):
    with v1_ws(relay) as c:
        c.send_text(b'{"type":"hello"}', mask=False)
        c.expect_close(1002)


def test_v1_ws_no_hello_closed_4501(relay_factory):
    relay = relay_factory("--hello-timeout", "1000")
    with v1_ws(relay) as c:
        t0 = time.monotonic()
        c.expect_close(4501, timeout=5.0)
        assert time.monotonic() - t0 > 0.5


# ----------------------------------------- shutdown with unfinished HTTP heads
def test_sigterm_with_half_sent_http_head_exits_within_drain_timeout(relay_factory):
    relay = relay_factory("--echo", "--drain-timeout", "2000")
    half = RawClient(relay.port)
    ws = wsraw.connect(relay.port)
    with half, ws:
        half.send(b"GET /v1/echo HTTP/1.1\r\nHost: x\r\nUpgr")
        t0 = time.monotonic()
        relay.proc.send_signal(signal.SIGTERM)
        ws.expect_close(1001, timeout=5.0)
        try:
            rc = relay.proc.wait(timeout=2.0 + 3.0)
        except subprocess.TimeoutExpired:
            pytest.fail("relay still running 5 s after SIGTERM with --drain-timeout 2000 (a half-sent HTTP head held it)")
        assert rc == 0
        assert time.monotonic() - t0 < 2.0 + 1.5
        assert half.is_closed_within(2.0)
