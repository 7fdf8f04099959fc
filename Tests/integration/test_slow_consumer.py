"""Contract §1: a reader slower than the stream is closed with 4008, and it sees the
close frame: the relay drops whole unsent frames, never cuts one, and sends the close
after what is already in flight. The reader here is slow, not stopped. The rates are
high enough that the kernel's send buffer (autotuned up to tcp_wmem's 4 MiB) fills in
seconds; the reader then still has that much to read before it sees the close."""
from __future__ import annotations

import json
import re
import threading
import time
import urllib.request

import wsraw
from wsraw import OP_CLOSE, OP_TEXT, RawClient

READ_BYTES_PER_S = 400_000  # a fifth of the stream below


def hello_and_join(c: RawClient, uid: str, session: str) -> None:
    c.handshake("/v1/ws", protocols=["relay.v1"])
    c.send_text(json.dumps({"type": "hello", "dev": {"uid": uid, "name": uid}}))
    assert json.loads(c.recv_message(timeout=5)[1])["type"] == "welcome"
    c.send_text(json.dumps({"type": "session.join", "session": session}))
    while json.loads(c.recv_message(timeout=5)[1])["type"] != "session.joined":
        pass


def metric(relay, name: str) -> float:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        m = re.search(rf"^{name} ([0-9.e+]+)$", r.read().decode(), re.M)
    return float(m.group(1)) if m else 0.0


def test_slow_reader_gets_4008_after_whole_frames(relay_factory):
    # No heartbeats: a reader this far behind answers pings late; that is not the subject.
    relay = relay_factory("--max-outbound-bytes", "131072", "--message-rate", "1000",
                          "--heartbeat-interval", "0", "--heartbeat-timeout", "0")
    slow = RawClient(relay.port, rcvbuf=8192)
    producer = RawClient(relay.port)
    hello_and_join(slow, "slow", "s")
    hello_and_join(producer, "producer", "s")
    stop = threading.Event()

    def drain_producer():  # the producer reads its own copies, so only `slow` lags
        while not stop.is_set():
            try:
                producer.recv_frame(timeout=0.5)
            except wsraw.ReadTimeout:
                continue
            except wsraw.ConnectionClosed:
                return

    def produce():  # 8 KB messages at up to 250/s: about 2 MB/s
        data = "x" * 8000
        while not stop.is_set():
            producer.send_text(json.dumps({"type": "message.send", "session": "s", "data": data}), ignore_errors=True)
            stop.wait(0.004)

    threads = [threading.Thread(target=drain_producer, daemon=True), threading.Thread(target=produce, daemon=True)]
    for t in threads:
        t.start()
    outcome = None
    frames = 0
    deadline = time.monotonic() + 60
    try:
        while outcome is None and time.monotonic() < deadline:
            try:
                f = slow.recv_frame(timeout=20)
            except wsraw.ConnectionClosed as e:
                outcome = ("tcp", e.how, len(e.partial))  # 1006: what the contract rules out
                break
            if f.opcode == OP_CLOSE:
                outcome = ("close", f.close_code)
                break
            assert f.opcode == OP_TEXT and json.loads(f.payload)["type"] in ("message", "participant.joined")
            frames += 1
            time.sleep(len(f.payload) / READ_BYTES_PER_S)  # the slow reader's pace
    finally:
        stop.set()
    assert outcome == ("close", 4008), f"after {frames} whole frames: {outcome}"
    assert slow.is_closed_within(10.0)
    assert metric(relay, "relay_slow_consumer_closes_total") == 1  # once per connection
    for t in threads:
        t.join(timeout=5)
    producer.close()
    assert relay.proc.poll() is None
