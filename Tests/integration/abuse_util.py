"""Helpers of the abuse tests: many silent raw members, and /metrics readings."""
from __future__ import annotations

import base64
import json
import os
import re
import socket
import time
import urllib.request


def metrics_text(relay) -> str:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=10) as r:
        return r.read().decode()


def metric(relay, name: str, text: str | None = None) -> float:
    """Sum of every series of `name` (0 when absent)."""
    text = text if text is not None else metrics_text(relay)
    return sum(float(v) for v in re.findall(rf"^{re.escape(name)}(?:{{[^}}]*}})? ([0-9.e+-]+)$", text, re.M))


def turns_longer_than(relay, seconds: str) -> int:
    """Loop turns longer than the `relay_loop_turn_seconds` bucket `seconds`."""
    text = metrics_text(relay)
    total = float(re.search(r"^relay_loop_turn_seconds_count ([0-9.e+]+)$", text, re.M).group(1))
    within = float(re.search(rf'^relay_loop_turn_seconds_bucket{{le="{seconds}"}} ([0-9.e+]+)$', text, re.M).group(1))
    return int(total - within)


def wait_for_metric(relay, name: str, at_least: float, timeout: float) -> float:
    """Polls /metrics until `name` reaches `at_least` (the relay offers no event for it)."""
    deadline = time.monotonic() + timeout
    while True:
        value = metric(relay, name)
        if value >= at_least or time.monotonic() > deadline:
            return value
        time.sleep(0.2)


def masked_text(payload: bytes) -> bytes:
    key = os.urandom(4)
    body = bytes(b ^ key[i % 4] for i, b in enumerate(payload))
    n = len(payload)
    head = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0x80 | 126]) + n.to_bytes(2, "big")
    return head + key + body


def silent_member(port: int, uid: str, session: str, timeout: float = 20) -> socket.socket:
    """A socket that upgrades, says hello, joins `session`, waits for its snapshot
    and then never reads nor writes again (no pongs: a dead peer to the relay)."""
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    key = base64.b64encode(os.urandom(16)).decode()
    s.sendall(
        f"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: relay.v1\r\n\r\n".encode()
        + masked_text(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}).encode())
        + masked_text(json.dumps({"type": "session.join", "session": session}).encode())
    )
    seen = b""
    while b"session.joined" not in seen:
        chunk = s.recv(65536)
        assert chunk, f"{uid}: closed before its snapshot"
        seen = seen[-32:] + chunk
    return s


def last_word(sockets) -> None:
    """Each socket sends one masked, empty ping frame: all were heard at about the
    same moment, so they all time out together."""
    frame = bytes([0x89, 0x80]) + os.urandom(4)
    for s in sockets:
        s.sendall(frame)


def rejoin(sockets, session_of) -> None:
    """Each socket sends `session.leave` and `session.join` of its session at once."""
    for i, s in enumerate(sockets):
        session = session_of(i)
        s.sendall(
            masked_text(json.dumps({"type": "session.leave", "session": session}).encode())
            + masked_text(json.dumps({"type": "session.join", "session": session}).encode())
        )
