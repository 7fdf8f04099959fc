"""protocol/PROTOCOL.md §1 and §8 under a reader slower than its session: the relay
bounds what the kernel holds per socket (`--socket-send-buffer-bytes`), sends pings
ahead of queued data (RFC 6455 §5.4/§5.5) and counts bytes the peer acknowledged as
proof of life, so the slow reader is judged by the outbound cap, not by the
heartbeat, and ends with a complete close frame 4008 — not a reset and a truncated
frame. A reader that keeps up, with a backlog, is never cut."""
from __future__ import annotations

import json
import threading
import time

import wsraw
from test_slow_consumer import hello_and_join, metric  # one copy of each helper
from wsraw import OP_CLOSE, OP_TEXT, RawClient

STREAM_MSG_BYTES = 8_000
STREAM_PER_S = 20  # 160 KB/s into the session
SLOW_READ_BYTES_PER_S = 80_000  # half of it




class Stream:
    """A producer sending STREAM_PER_S messages of STREAM_MSG_BYTES into `session`,
    reading its own copies so only the reader under test can lag."""

    def __init__(self, relay, session: str):
        self.producer = RawClient(relay.port)
        hello_and_join(self.producer, "producer", session)
        self.session = session
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._drain, daemon=True),
                        threading.Thread(target=self._produce, daemon=True)]
        for t in self.threads:
            t.start()

    def _drain(self):
        while not self.stop.is_set():
            try:
                self.producer.recv_frame(timeout=0.5)
            except wsraw.ReadTimeout:
                continue
            except (wsraw.ConnectionClosed, OSError):
                return

    def _produce(self):
        data = "x" * STREAM_MSG_BYTES
        text = json.dumps({"type": "message.send", "session": self.session, "data": data})
        while not self.stop.is_set():
            self.producer.send_text(text, ignore_errors=True)
            self.stop.wait(1 / STREAM_PER_S)  # the producer's pace, not a synchronisation

    def close(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=5)
        self.producer.close()


def read_until_end(reader: RawClient, pace_bytes_per_s: float | None, limit_s: float):
    """Reads frames (answering pings) until a close frame or the TCP end; returns
    ("close", code) or ("tcp", how, partial bytes), and the count of whole frames."""
    frames = 0
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        try:
            f = reader.recv_frame(timeout=max(0.1, deadline - time.monotonic()))
        except wsraw.ConnectionClosed as e:
            return ("tcp", e.how, len(e.partial)), frames
        except wsraw.ReadTimeout:
            break
        if f.opcode == OP_CLOSE:
            return ("close", f.close_code), frames
        assert f.opcode == OP_TEXT
        frames += 1
        if pace_bytes_per_s:
            time.sleep(len(f.payload) / pace_bytes_per_s)  # the reader's pace
    return ("still open",), frames


def test_reader_slower_than_its_session_gets_a_whole_4008(relay_factory):
    # Heartbeats on and short: before the fix the pings sat behind megabytes in the
    # kernel's send buffer and the reader was dropped (reset, truncated frame).
    relay = relay_factory("--max-outbound-bytes", "262144", "--message-rate", "1000",
                          "--heartbeat-interval", "2000", "--heartbeat-timeout", "5000")
    slow = RawClient(relay.port, rcvbuf=16384)
    hello_and_join(slow, "slow", "s")
    stream = Stream(relay, "s")
    try:
        outcome, frames = read_until_end(slow, SLOW_READ_BYTES_PER_S, limit_s=90)
    finally:
        stream.close()
    assert outcome == ("close", 4008), f"after {frames} whole frames: {outcome}"
    assert slow.pings_seen, "heartbeat pings reached the slow reader"
    assert slow.is_closed_within(10.0)
    assert metric(relay, "relay_slow_consumer_closes_total") == 1
    # Kernel memory per socket is the SO_SNDBUF choice (Linux keeps twice 65 536).
    assert metric(relay, "relay_socket_send_buffer_bytes") == 2 * 65536
    assert relay.proc.poll() is None


def test_reader_that_catches_up_after_a_backlog_is_not_cut(relay_factory):
    relay = relay_factory("--max-outbound-bytes", "262144", "--message-rate", "1000",
                          "--heartbeat-interval", "2000", "--heartbeat-timeout", "5000")
    reader = RawClient(relay.port, rcvbuf=16384)
    hello_and_join(reader, "reader", "s")
    stream = Stream(relay, "s")
    try:
        # A backlog first: 1 s of the stream unread (well within the cap), then the
        # reader reads at five times the stream's rate for 8 s.
        stream.stop.wait(1.0)
        outcome, frames = read_until_end(reader, 5 * STREAM_PER_S * STREAM_MSG_BYTES, limit_s=8)
    finally:
        stream.close()
    assert outcome == ("still open",), f"after {frames} frames: {outcome}"
    assert frames >= 8 * STREAM_PER_S * 0.8
    assert metric(relay, "relay_slow_consumer_closes_total") == 0
    reader.close()
