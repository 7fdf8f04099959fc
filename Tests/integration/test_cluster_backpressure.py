"""Backpressure instead of bus resets (contract §12, "At scale"; docs/cluster.md,
"Backpressure"): a node whose appends back up behind a Redis that still answers
stops reading the sockets that feed them, and clients see latency, never
`unavailable`.

The node reaches Redis through a slow link (a local TCP relay that forwards what the
node writes at a fixed byte rate, per connection, and its answers at once): Redis
answers everything, late, while writers pipeline more than the link carries.
Without backpressure the node's own pipeline outgrows its reply limit and the node
drops the connection and refuses commands `unavailable`.
"""
from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

from cluster import Node, Redis
from relayclient import Client
from wsraw import build_frame

LINK_BYTES_PER_S = 256 * 1024
WRITERS = 8
MESSAGES = 200  # per writer, pipelined
DATA = "x" * 1000


class SlowLink(threading.Thread):
    """127.0.0.1:port → Redis; node → Redis at `rate` bytes/s per connection."""

    def __init__(self, target_port: int, rate: int):
        super().__init__(daemon=True)
        self.target_port, self.rate = target_port, rate
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.loop = asyncio.new_event_loop()
        self.server = None
        self.started = threading.Event()

    def run(self) -> None:
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._accept, sock=self.listener))
        self.started.set()
        self.loop.run_forever()

    async def _accept(self, r_node, w_node) -> None:
        r_redis, w_redis = await asyncio.open_connection("127.0.0.1", self.target_port)

        async def slow(reader, writer) -> None:
            chunk = 4096
            try:
                while data := await reader.read(chunk):
                    writer.write(data)
                    await writer.drain()
                    await asyncio.sleep(len(data) / self.rate)  # the link's rate, not a synchronisation
            finally:
                writer.close()

        async def fast(reader, writer) -> None:
            try:
                while data := await reader.read(65536):
                    writer.write(data)
                    await writer.drain()
            finally:
                writer.close()

        await asyncio.gather(slow(r_node, w_redis), fast(r_redis, w_node), return_exceptions=True)

    def stop(self) -> None:
        async def close() -> None:
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for t in tasks:
                t.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            self.loop.stop()
        asyncio.run_coroutine_threadsafe(close(), self.loop)
        self.join(timeout=5)
        if not self.is_alive():
            self.loop.close()


async def _writer(node: Node, n: int, messages: int = MESSAGES, one_write: bool = False) -> tuple[dict[str, int], list[int]]:
    """Joins its own session, pipelines `messages` sends (`one_write`: all their frames
    in one socket write); reply codes and the seqs it heard."""
    c = await Client.connect(node.ws)
    await c.hello_dev(f"writer{n}")
    await c.send({"type": "session.join", "id": "j", "session": f"room{n}"})
    await c.recv_type("session.joined", 30)
    sends = [{"type": "message.send", "id": f"m{i}", "session": f"room{n}", "data": DATA} for i in range(messages)]
    if one_write:
        c.ws.transport.write(b"".join(build_frame(0x1, json.dumps(m).encode()) for m in sends))
    for m in [] if one_write else sends:
        await c.send(m)
    replies: dict[str, int] = {}
    seqs: list[int] = []
    deadline = time.monotonic() + 90
    while sum(replies.values()) < messages or len(seqs) < replies.get("ok", 0):
        m = await c.recv(max(0.1, deadline - time.monotonic()))
        if m.get("type") in ("ok", "error") and str(m.get("re", "")).startswith("m"):
            key = m["type"] if m["type"] == "ok" else m.get("code", "?")
            replies[key] = replies.get(key, 0) + 1
        elif m.get("type") == "message":
            seqs.append(m["seq"])
    await c.close()
    return replies, seqs


async def _through_a_slow_link(tmp_path, rate: int, writers: int, messages: int, one_write: bool = False) -> None:
    """`writers` clients pipeline `messages` each through a node whose link to Redis
    carries `rate` bytes/s: every command `ok`, in order, and the bus never lost."""
    redis = Redis(tmp_path)
    link = SlowLink(redis.port, rate)
    link.start()
    link.started.wait(5)
    node = None
    try:
        node = Node(tmp_path, f"redis://127.0.0.1:{link.port}", "n1",
                    ["--message-rate", "100000", "--heartbeat-timeout", "60000"])
        results = await asyncio.gather(*(_writer(node, n, messages, one_write) for n in range(writers)))
        log = node.output()
        for replies, seqs in results:
            assert replies == {"ok": messages}, (replies, log)
            assert seqs == list(range(seqs[0], seqs[0] + messages)), seqs
        assert "cluster bus lost" not in log, log
    finally:
        if node:
            node.stop()
        link.stop()
        redis.stop()


async def test_a_slow_redis_means_latency_not_unavailable(tmp_path):
    await _through_a_slow_link(tmp_path, LINK_BYTES_PER_S, WRITERS, MESSAGES)


async def test_a_turns_reads_leave_in_records_a_slow_link_carries_within_the_reply_limit(tmp_path):
    """Each writer's messages arrive in one write, so one loop turn reads far more
    than a 64 KiB/s link carries in the 2 s reply limit (docs/cluster.md, "The log": a turn's batch is cut into records of at most
    64 KiB): sent as one record, its reply could not come in time and the node would
    declare a Redis that answers lost."""
    await _through_a_slow_link(tmp_path, 64 * 1024, 4, 150, one_write=True)
