"""Bad and hostile HTTP input on the relay's one port (PROTOCOL.md §1).

Garbage, oversized and trickled request heads, wrong methods and versions,
incomplete upgrade requests, unknown paths. After every case a fresh client
must still be served: the relay keeps serving everyone else.
"""
from __future__ import annotations

import base64
import os
import time

import pytest

import wsraw
from wsraw import OP_TEXT, RawClient

HEAD_LIMIT = 8 * 1024
HEAD_TIMEOUT_S = 10.0


@pytest.fixture
def srv(echo_relay):
    yield echo_relay
    assert echo_relay.proc.poll() is None, f"relay exited with {echo_relay.proc.returncode} during the test"


def assert_serving(relay) -> None:
    """A fresh client gets /healthz and a WebSocket echo."""
    assert relay.proc.poll() is None, f"relay exited with {relay.proc.returncode}"
    resp = wsraw.http_get(relay.port, "/healthz")
    assert resp.status == 200
    with wsraw.connect(relay.port, "/v1/echo") as c:
        c.send_text("still serving")
        assert c.recv_message() == (OP_TEXT, b"still serving")
        c.close_handshake(1000)


def send_raw(relay, data: bytes, timeout: float = 5.0) -> tuple[wsraw.HTTPResponse, RawClient]:
    c = RawClient(relay.port, timeout=timeout)
    c.send(data, ignore_errors=True)
    try:
        return c.read_http_response(timeout), c
    except wsraw.ConnectionClosed as e:
        c.close()
        raise AssertionError(f"connection closed ({e.how}) without an HTTP response to {data[:60]!r}") from None
    except wsraw.ReadTimeout:
        c.close()
        raise AssertionError(f"no HTTP response within {timeout}s to {data[:60]!r}") from None


def upgrade_request(port: int, path: str = "/v1/echo", *, method: str = "GET", version: str = "HTTP/1.1",
                    drop: tuple[str, ...] = (), extra: list[tuple[str, str]] | None = None) -> bytes:
    hdrs = [
        ("Host", f"127.0.0.1:{port}"),
        ("Upgrade", "websocket"),
        ("Connection", "Upgrade"),
        ("Sec-WebSocket-Key", base64.b64encode(os.urandom(16)).decode()),
        ("Sec-WebSocket-Version", "13"),
    ]
    hdrs = [(k, v) for k, v in hdrs if k not in drop] + (extra or [])
    return (f"{method} {path} {version}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in hdrs) + "\r\n").encode()


def expect_error_and_close(relay, data: bytes, statuses: tuple[int, ...]) -> wsraw.HTTPResponse:
    resp, c = send_raw(relay, data)
    with c:
        assert resp.status in statuses, f"expected HTTP {statuses}, got {resp.status}: {resp.raw_head!r}"
        assert resp.status != 101
        assert c.is_closed_within(5.0), f"connection left open after HTTP {resp.status}"
    assert_serving(relay)
    return resp


# ------------------------------------------------------------------ garbage
GARBAGE = {
    "binary_then_request": b"\x00\x01\x02garbage\xff\xfe\r\nGET /healthz HTTP/1.1\r\nHost: x\r\n\r\n",
    "tls_client_hello": b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + os.urandom(32) + b"\r\n\r\n",
    "no_spaces": b"GARBAGE\r\n\r\n",
    "missing_version": b"GET /healthz\r\nHost: x\r\n\r\n",
    "bad_version": b"GET /healthz HTTX/1.1\r\nHost: x\r\n\r\n",
    "words": b"hello there general kenobi\r\n\r\n",
    "random_bytes": bytes(range(1, 256)).replace(b"\r", b"").replace(b"\n", b"") + b"\r\n\r\n",
    "header_without_colon": b"GET /healthz HTTP/1.1\r\nHost: x\r\nthis is not a header\r\n\r\n",
    "space_before_colon": b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n",
    "nul_in_header": b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-A: b\x00c\r\n\r\n",
}


@pytest.mark.parametrize("name", list(GARBAGE))
def test_garbage_request_400_and_close(srv, name):
    expect_error_and_close(srv, GARBAGE[name], (400,))


@pytest.mark.parametrize("data", [
    b"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03" + bytes(range(64)),  # TLS ClientHello, no CRLF anywhere
    b"\x00\x01\x02\x03",
    b"GE\x01T / HTTP/1.1\r\n",
], ids=["tls_hello_no_crlf", "binary_no_crlf", "ctl_in_method"])
def test_garbage_answered_without_waiting_for_head_end(srv, data):
    # Bytes that can never start a request line: 400 at once, not after the
    # head timeout.
    t0 = time.monotonic()
    resp = expect_error_and_close(srv, data, (400,))
    assert resp.status == 400
    assert time.monotonic() - t0 < 5.0


def test_http2_prior_knowledge_preface_refused(srv):
    expect_error_and_close(srv, b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", (400, 505))


def test_garbage_then_many_fresh_clients(srv):
    for name in ("binary_then_request", "tls_client_hello", "random_bytes"):
        resp, c = send_raw(srv, GARBAGE[name])
        with c:
            assert resp.status == 400
    for _ in range(5):
        assert_serving(srv)


# ------------------------------------------------------------ oversized head
def test_head_over_8k_one_header_431(srv):
    req = b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (HEAD_LIMIT + 100) + b"\r\n\r\n"
    expect_error_and_close(srv, req, (431,))


def test_head_over_8k_many_headers_431(srv):
    lines = b"".join(b"X-H%03d: %s\r\n" % (i, b"v" * 90) for i in range(100))  # ~10 KB
    expect_error_and_close(srv, b"GET /healthz HTTP/1.1\r\nHost: x\r\n" + lines + b"\r\n", (431,))


def test_upgrade_head_over_8k_431(srv):
    req = upgrade_request(srv.port, extra=[("X-Pad", "p" * (HEAD_LIMIT + 10))])
    expect_error_and_close(srv, req, (431,))


def test_head_over_8k_without_end_answered_without_waiting(srv):
    # The head never ends; the relay must answer once it has seen > 8 KiB,
    # not wait for the head timeout.
    c = RawClient(srv.port, timeout=5.0)
    with c:
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * (HEAD_LIMIT + 1000), ignore_errors=True)
        t0 = time.monotonic()
        resp = c.read_http_response(timeout=3.0)
        assert resp.status == 431, resp.raw_head
        assert time.monotonic() - t0 < 3.0
        assert c.is_closed_within(5.0)
    assert_serving(srv)


def test_head_just_under_8k_accepted(srv):
    base = b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\nX-Pad: \r\n\r\n"
    req = base.replace(b"X-Pad: ", b"X-Pad: " + b"a" * (HEAD_LIMIT - 200 - len(base)))
    assert len(req) < HEAD_LIMIT
    resp, c = send_raw(srv, req)
    with c:
        assert resp.status == 200, resp.raw_head


def test_upgrade_head_just_under_8k_accepted(srv):
    with RawClient(srv.port) as c:
        c.handshake("/v1/echo", headers=[("X-Pad", "p" * (HEAD_LIMIT - 400))])
        c.send_text("big head ok")
        assert c.recv_message() == (OP_TEXT, b"big head ok")
        c.close_handshake(1000)


# ----------------------------------------------------- slowloris / head timeout
def test_trickled_and_idle_heads_closed_after_head_timeout(srv):
    """Head not complete within 10 000 ms of the connection → socket closed.

    One connection trickles a never-ending head one byte per 0.5 s, another
    sends nothing; both must be closed between ~10 s and 12 s after connect,
    while fresh clients keep being served."""
    t0 = time.monotonic()
    trickle = RawClient(srv.port, timeout=5.0)
    idle = RawClient(srv.port, timeout=5.0)
    with trickle, idle:
        trickle.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
        trickle_closed_at = idle_closed_at = None
        served_midway = False
        deadline = t0 + HEAD_TIMEOUT_S + 2.0
        while time.monotonic() < deadline and (trickle_closed_at is None or idle_closed_at is None):
            if trickle_closed_at is None:
                if not trickle.send(b"a", ignore_errors=True) or trickle.is_closed_within(0.25):
                    trickle_closed_at = time.monotonic() - t0
            if idle_closed_at is None and idle.is_closed_within(0.25):
                idle_closed_at = time.monotonic() - t0
            if not served_midway and time.monotonic() - t0 > 5.0:
                assert_serving(srv)  # the slow connections block no one
                served_midway = True
        assert trickle_closed_at is not None, "trickled head still open 12 s after connect"
        assert idle_closed_at is not None, "idle connection (no bytes) still open 12 s after connect"
        # Must not cut a connection long before its 10 s (timer granularity slack).
        assert trickle_closed_at > HEAD_TIMEOUT_S - 1.0, f"trickled head closed after {trickle_closed_at:.1f}s"
        assert idle_closed_at > HEAD_TIMEOUT_S - 1.0, f"idle connection closed after {idle_closed_at:.1f}s"
    assert_serving(srv)


# ---------------------------------------------------- bad upgrade requests
@pytest.mark.parametrize("method", ["POST", "PUT", "DELETE"])
def test_wrong_method_upgrade_405_or_400(srv, method):
    req = upgrade_request(srv.port, "/v1/ws", method=method,
                          extra=[("Sec-WebSocket-Protocol", "relay.v1"), ("Content-Length", "0")])
    expect_status_not_upgraded(srv, req, (405, 400))


def test_post_to_echo_405_or_400(srv):
    req = upgrade_request(srv.port, "/v1/echo", method="POST", extra=[("Content-Length", "0")])
    expect_status_not_upgraded(srv, req, (405, 400))


def expect_status_not_upgraded(relay, req: bytes, statuses: tuple[int, ...]) -> wsraw.HTTPResponse:
    resp, c = send_raw(relay, req)
    with c:
        assert resp.status in statuses, f"expected HTTP {statuses}, got {resp.status}: {resp.raw_head!r}"
        assert resp.header("Sec-WebSocket-Accept") is None
    assert_serving(relay)
    return resp


@pytest.mark.parametrize("path", ["/v1/echo", "/v1/ws"])
def test_missing_key_400(srv, path):
    extra = [("Sec-WebSocket-Protocol", "relay.v1")] if path == "/v1/ws" else []
    expect_status_not_upgraded(srv, upgrade_request(srv.port, path, drop=("Sec-WebSocket-Key",), extra=extra), (400,))


@pytest.mark.parametrize("key", ["", "not base64!!", base64.b64encode(b"short").decode(),
                                 base64.b64encode(os.urandom(20)).decode()], ids=["empty", "not_b64", "5_bytes", "20_bytes"])
def test_invalid_key_400(srv, key):
    # RFC 6455 §4.2.1: the key must decode to 16 bytes.
    req = upgrade_request(srv.port, drop=("Sec-WebSocket-Key",), extra=[("Sec-WebSocket-Key", key)])
    expect_status_not_upgraded(srv, req, (400,))


def test_http_1_0_upgrade_400(srv):
    expect_status_not_upgraded(srv, upgrade_request(srv.port, version="HTTP/1.0"), (400,))


def test_missing_host_400(srv):
    expect_status_not_upgraded(srv, upgrade_request(srv.port, drop=("Host",)), (400,))


def test_duplicate_host_upgrade_400(srv):
    # RFC 9112 §3.2: more than one Host field line → the server MUST answer 400.
    req = upgrade_request(srv.port, extra=[("Host", "other.example:80")])
    expect_status_not_upgraded(srv, req, (400,))


def test_missing_host_plain_get_400(srv):
    # RFC 9112 §3.2: an HTTP/1.1 request without Host → the server MUST answer 400.
    expect_status_not_upgraded(srv, b"GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n", (400,))


def test_duplicate_host_plain_get_400(srv):
    expect_status_not_upgraded(srv, b"GET /healthz HTTP/1.1\r\nHost: a\r\nHost: b\r\nConnection: close\r\n\r\n", (400,))


@pytest.mark.parametrize("drop,extra", [
    (("Upgrade",), []),
    (("Connection",), []),
    (("Upgrade",), [("Upgrade", "h2c")]),
    (("Connection",), [("Connection", "keep-alive")]),
], ids=["no_upgrade", "no_connection", "upgrade_h2c", "connection_keepalive"])
def test_incomplete_upgrade_refused(srv, drop, extra):
    # RFC 6455 §4.2.1: not a valid opening handshake → 400 (426 also tells the client to upgrade).
    expect_status_not_upgraded(srv, upgrade_request(srv.port, drop=drop, extra=extra), (400, 426))


def test_missing_version_refused(srv):
    resp = expect_status_not_upgraded(srv, upgrade_request(srv.port, drop=("Sec-WebSocket-Version",)), (400, 426))
    if resp.status == 426:
        assert resp.header("Sec-WebSocket-Version") == "13"


def test_upgrade_header_values_case_insensitive(srv):
    # RFC 6455 §4.2.1: "websocket" and "Upgrade" tokens are case-insensitive;
    # Connection may be a list.
    req = upgrade_request(srv.port, drop=("Upgrade", "Connection"),
                          extra=[("upgrade", "WebSocket"), ("connection", "keep-alive, UPGRADE")])
    c = RawClient(srv.port)
    with c:
        c.send(req)
        resp = c.read_http_response()
        assert resp.status == 101, resp.raw_head
        c.send_text("case")
        assert c.recv_message() == (OP_TEXT, b"case")
        c.close_handshake(1000)


# ------------------------------------------------------------- routes
@pytest.mark.parametrize("path", ["/", "/nope", "/v1", "/v1/echo/extra", "/v2/ws", "/healthz/x"])
def test_unknown_path_404(srv, path):
    resp = wsraw.http_get(srv.port, path)
    assert resp.status == 404, f"GET {path}: {resp.status}"
    assert_serving(srv)


def test_unknown_path_upgrade_404(srv):
    expect_status_not_upgraded(srv, upgrade_request(srv.port, "/v1/nope"), (404,))


def test_echo_disabled_without_flag_404(relay):
    with RawClient(relay.port) as c:
        resp = c.handshake("/v1/echo", expect_status=404)
        assert resp.header("Sec-WebSocket-Accept") is None
    assert wsraw.http_get(relay.port, "/healthz").status == 200


def test_healthz_200_ok(srv):
    resp = wsraw.http_get(srv.port, "/healthz")
    assert resp.status == 200
    assert resp.body.strip() == b"ok", resp.body


def test_readyz_200(srv):
    assert wsraw.http_get(srv.port, "/readyz").status == 200


def test_healthz_second_request_on_connection(srv):
    # HTTP/1.1 (RFC 9112 §9.3, §9.6): a server that closes the connection after a
    # response says so with "Connection: close"; otherwise the next request on
    # the same connection gets its own response.
    with RawClient(srv.port) as c:
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = c.read_http_response()
        assert resp.status == 200 and resp.body.strip() == b"ok"
        if "close" in (resp.header("Connection") or "").lower():
            assert c.is_closed_within(5.0), "Connection: close announced but connection left open"
            return
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
        resp = c.read_http_response()
        assert resp.status == 200 and resp.body.strip() == b"ok"


def test_healthz_in_one_byte_chunks(srv):
    with RawClient(srv.port) as c:
        c.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", chunks=1, pause=0.001)
        resp = c.read_http_response()
        assert resp.status == 200 and resp.body.strip() == b"ok"


def test_connect_and_close_without_bytes(srv):
    for _ in range(20):
        RawClient(srv.port).close()
    assert_serving(srv)


def test_reset_mid_head(srv):
    import socket as _s
    import struct
    for _ in range(5):
        c = RawClient(srv.port)
        c.send(b"GET /v1/echo HTTP/1.1\r\nHost: x\r\nUpg")
        c.sock.setsockopt(_s.SOL_SOCKET, _s.SO_LINGER, struct.pack("ii", 1, 0))  # close → RST
        c.close()
    assert_serving(srv)


def test_query_string_does_not_change_route(srv):
    # The route is the path; a query (e.g. a browser's token) does not make it unknown.
    assert wsraw.http_get(srv.port, "/healthz?probe=1").status == 200
    with wsraw.connect(srv.port, "/v1/echo?client=test&x=%20y") as c:
        c.send_text("query ok")
        assert c.recv_message() == (OP_TEXT, b"query ok")
        c.close_handshake(1000)


def test_header_names_case_insensitive(srv):
    # RFC 9110 §5.1: field names are case-insensitive.
    key = base64.b64encode(os.urandom(16)).decode()
    req = (f"GET /v1/echo HTTP/1.1\r\nhost: 127.0.0.1\r\nUPGRADE: websocket\r\nconnection: Upgrade\r\n"
           f"sec-websocket-key: {key}\r\nSEC-WEBSOCKET-VERSION: 13\r\n\r\n").encode()
    with RawClient(srv.port) as c:
        c.send(req)
        resp = c.read_http_response()
        assert resp.status == 101, resp.raw_head
        assert resp.header("Sec-WebSocket-Accept") == wsraw.accept_key(key)
        c.send_text("lower")
        assert c.recv_message() == (OP_TEXT, b"lower")
        c.close_handshake(1000)


# ------------------------------------------------------------------ fuzzing
def mutated_request(port: int, seed: int) -> bytes:
    import random

    rnd = random.Random(seed)
    data = bytearray(upgrade_request(port, rnd.choice(["/v1/echo", "/v1/ws", "/healthz", "/x"])))
    for _ in range(rnd.randint(1, 6)):
        op = rnd.choice(["flip", "insert", "delete", "dup"])
        i = rnd.randrange(len(data))
        if op == "flip":
            data[i] = rnd.randrange(256)
        elif op == "insert":
            data[i:i] = rnd.choice([b"\r", b"\n", b"\r\n", b":", b" ", b"\x00", b"\xff", b"X" * 300])
        elif op == "delete":
            del data[i:i + rnd.randint(1, 10)]
        else:
            j = rnd.randrange(len(data))
            data[i:i] = data[min(i, j):max(i, j)][:2000]
    if not data.endswith(b"\r\n\r\n"):
        data += b"\r\n\r\n"
    return bytes(data)


def http_fuzz_case(port: int, seed: int) -> str:
    data = mutated_request(port, seed)
    with RawClient(port, timeout=3.0) as c:
        c.send(data, ignore_errors=True)
        try:
            resp = c.read_http_response(timeout=3.0)
        except wsraw.ConnectionClosed:
            return "tcp"
        except wsraw.ReadTimeout:
            return "waiting"  # e.g. a Content-Length the mutation invented; the head timeout ends it
        assert 100 <= resp.status <= 599, f"seed {seed}: status {resp.status}"
        if resp.status == 101:
            c.send_close(1000)
        return str(resp.status)


def test_fuzz_mutated_heads_never_break_the_server(srv):
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=16) as pool:
        outcomes = list(pool.map(lambda s: http_fuzz_case(srv.port, s), range(600)))
    assert srv.proc.poll() is None, "relay died under mutated request heads"
    print({o: outcomes.count(o) for o in sorted(set(outcomes))})
    assert_serving(srv)
