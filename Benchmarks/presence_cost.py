"""What a join costs on the wire in a big room, with and without `presence.diff`
(protocol/ §5.6): MEMBERS members join one session as fast as allowed (256 connecting at
once) and read everything; prints WebSocket frames and bytes received per join, over all
members, and the ramp.

    python3 Benchmarks/presence_cost.py [MEMBERS]     (RELAY_BIN: the relay to measure)
"""
from __future__ import annotations

import json
import os
import selectors
import socket
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
os.environ.setdefault("RELAY_BIN", str(ROOT / ".build" / "release" / "relay"))

from abuse_util import masked_text  # noqa: E402
from conftest import RelayProcess  # noqa: E402

WINDOW = 256


def opening(uid: str, capable: bool) -> bytes:
    hello = {"type": "hello", "dev": {"uid": uid, "name": uid}}
    if capable:
        hello["capabilities"] = ["presence.diff"]
    return (
        b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
        b"Sec-WebSocket-Protocol: relay.v1\r\n\r\n"
        + masked_text(json.dumps(hello).encode())
        + masked_text(json.dumps({"type": "session.join", "session": "room"}).encode())
    )


class Reader:
    """Counts the server's frames after the HTTP head (unmasked, RFC 6455 §5.2)."""

    def __init__(self):
        self.buf, self.head_done, self.frames, self.bytes = b"", False, 0, 0

    def feed(self, data: bytes) -> None:
        self.buf += data
        if not self.head_done:
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            self.buf, self.head_done = self.buf[end + 4:], True
        while len(self.buf) >= 2:
            n, at = self.buf[1] & 0x7F, 2
            if n == 126:
                if len(self.buf) < 4:
                    return
                n, at = int.from_bytes(self.buf[2:4], "big"), 4
            elif n == 127:
                if len(self.buf) < 10:
                    return
                n, at = int.from_bytes(self.buf[2:10], "big"), 10
            if len(self.buf) < at + n:
                return
            self.frames += 1
            self.bytes += at + n
            self.buf = self.buf[at + n:]


def run(members: int, capable: bool) -> str:
    relay = RelayProcess(["--heartbeat-interval", "0", "--session-join-rate", "0", "--max-participants", str(members + 1)])
    sel, readers, started = selectors.DefaultSelector(), [], 0
    try:
        t0 = time.monotonic()
        while started < members or sel.get_map():
            while started < members and started - sum(r.frames > 0 for r in readers) < WINDOW:
                s = socket.create_connection(("127.0.0.1", relay.port), timeout=30)
                s.sendall(opening(f"m{started}", capable))
                s.setblocking(False)
                r = Reader()
                readers.append(r)
                sel.register(s, selectors.EVENT_READ, r)
                started += 1
            events = sel.select(timeout=2)
            if not events and started == members:
                break  # everything delivered
            for key, _ in events:
                chunk = key.fileobj.recv(1 << 20)
                if not chunk:
                    sel.unregister(key.fileobj)
                    continue
                key.data.feed(chunk)
        ramp = time.monotonic() - t0 - 2
        frames = sum(r.frames for r in readers) - members  # less each member's snapshot
        total = sum(r.bytes for r in readers)
        return (f"{members} members, presence.diff {'on' if capable else 'off'}: {frames / members:.1f} frames "
                f"and {total / members / 1024:.1f} KiB per join (all members together), ramp {ramp:.1f} s")
    finally:
        for key in list(sel.get_map().values()):
            key.fileobj.close()
        relay.stop()


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 999
    for capable in (False, True):
        print(run(n, capable), flush=True)
