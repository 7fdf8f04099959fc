"""A replay-filling load for cluster scale runs (docs/cluster.md, "Bounded history"):
one client per session, each sending ~1 KB app messages with a bounded window of
unanswered ones, as fast as the relay answers. The clients stay joined between
rounds (a session its last member leaves is removed, and its replay with it).
Shared by the scale test (test_cluster_scale.py) and `make bench-cluster`
(Benchmarks/cluster.py, scale rows)."""
from __future__ import annotations

import asyncio
import json
import time

from relayclient import Client


class Tally:
    """What the relay answered: `ok`s, error codes, and reply latencies (s)."""

    def __init__(self):
        self.ok = 0
        self.errors: dict[str, int] = {}
        self.latencies: list[float] = []

    def quantile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Sender:
    """One joined client of one session."""

    def __init__(self, client: Client, session: str):
        self.c = client
        self.session = session
        self.sent = 0

    @classmethod
    async def join(cls, ws_url: str, session: str) -> "Sender":
        c = await Client.connect(ws_url)
        await c.hello_dev("u-" + session)
        await c.send({"type": "session.join", "id": "j", "session": session})
        await c.recv_type("session.joined", timeout=30)
        return cls(c, session)

    async def send(self, count: int, size: int, window: int, tally: Tally) -> None:
        sent_at: dict[str, float] = {}
        free = asyncio.Semaphore(window)
        pad = "x" * size

        async def read() -> None:
            answered = 0
            while answered < count:
                m = await self.c.recv(timeout=60)
                sent = sent_at.pop(m.get("re", ""), None)
                if sent is None:
                    continue  # an event, not an answer
                answered += 1
                tally.latencies.append(time.monotonic() - sent)
                if m["type"] == "ok":
                    tally.ok += 1
                else:
                    code = m.get("code", m["type"])
                    tally.errors[code] = tally.errors.get(code, 0) + 1
                free.release()

        reader = asyncio.create_task(read())
        for _ in range(count):
            await free.acquire()
            self.sent += 1
            mid = f"m{self.sent}"
            sent_at[mid] = time.monotonic()
            await self.c.send(json.dumps(
                {"type": "message.send", "id": mid, "session": self.session, "data": {"i": self.sent, "p": pad}}))
        await reader


async def join_all(ws_urls: list[str], sessions: int, prefix: str = "scale") -> list[Sender]:
    """One sender per session, spread over the nodes round-robin."""
    return list(await asyncio.gather(*(Sender.join(ws_urls[i % len(ws_urls)], f"{prefix}-{i}")
                                       for i in range(sessions))))


async def fill(senders: list[Sender], per_session: int, size: int = 1000, window: int = 16) -> Tally:
    """`per_session` messages from every sender at once; the tally of answers."""
    tally = Tally()
    await asyncio.gather(*(s.send(per_session, size, window, tally) for s in senders))
    return tally
