"""protocol/ §5.6: a client that offers `presence.diff` and an old client in one session
see the same membership and an exact, gap-free seq stream, live (diffs) and across a
resume (per-event replay)."""
from __future__ import annotations

import asyncio
import json
import socket

from abuse_util import masked_text
from relayclient import Client

BURST = 40


def burst_join(port: int, session: str, prefix: str) -> list[socket.socket]:
    """BURST raw members whose upgrade, hello and join are all written before any is
    answered, so the relay reads many of them in one loop turn; each is read until its
    snapshot and then kept open."""
    socks = []
    for i in range(BURST):
        s = socket.create_connection(("127.0.0.1", port), timeout=20)
        socks.append(s)
    for i, s in enumerate(socks):
        s.sendall(
            b"GET /v1/ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n"
            b"Sec-WebSocket-Protocol: relay.v1\r\n\r\n"
            + masked_text(json.dumps({"type": "hello", "dev": {"uid": f"{prefix}{i}", "name": f"{prefix}{i}"}}).encode())
            + masked_text(json.dumps({"type": "session.join", "session": session}).encode())
        )
    for s in socks:
        seen = b""
        while b"session.joined" not in seen:
            chunk = s.recv(65536)
            assert chunk
            seen = seen[-32:] + chunk
    return socks


class Member:
    """A websocket member that tracks membership and seq from what it receives."""

    def __init__(self, client: Client, session: str):
        self.c, self.session = client, session
        self.seq = 0
        self.members: set[str] = set()
        self.diffs = 0

    async def hello(self, uid: str, capable: bool, resume: dict | None = None) -> dict:
        hello = {"type": "hello", "dev": {"uid": uid, "name": uid}}
        if capable:
            hello["capabilities"] = ["presence.diff"]
        if resume:
            hello["resume"] = resume
        await self.c.send(hello)
        return await self.c.recv_type("welcome")

    async def join(self) -> None:
        await self.c.send({"type": "session.join", "session": self.session})
        snap = await self.c.recv_type("session.joined")
        self.seq = snap["seq"]
        self.members = {p["uid"] for p in snap["participants"]}

    def apply(self, event: dict) -> None:
        assert event["seq"] == self.seq + 1, f"gap: {self.seq} then {event['seq']}"
        self.seq = event["seq"]
        t = event["type"]
        if t == "participant.joined":
            self.members.add(event["participant"]["uid"])
        elif t in ("participant.left", "participant.timed_out"):
            self.members.discard(event["uid"])

    def take(self, msg: dict) -> None:
        if msg["type"] == "participants.diff":
            self.diffs += 1
            assert msg["seqFrom"] == self.seq + 1 and msg["seq"] == msg["events"][-1]["seq"]
            for e in msg["events"]:
                self.apply(e)
        elif msg.get("session") == self.session and "seq" in msg and msg["type"] not in ("session.joined", "session.resumed"):
            self.apply(msg)

    async def until(self, seq: int, timeout: float = 30) -> None:
        while self.seq < seq:
            self.take(await self.c.recv(timeout=timeout))


async def test_diff_and_old_clients_agree_live_and_after_resume(relay_factory):
    relay = relay_factory("--heartbeat-interval", "0", "--session-join-rate", "0")
    new, old = Member(await Client.connect(relay.ws), "big"), Member(await Client.connect(relay.ws), "big")
    welcome = await new.hello("new", capable=True)
    assert welcome["capabilities"] == ["presence.diff"]
    assert "capabilities" not in await old.hello("old", capable=False)
    await new.join()
    await old.join()
    await new.until(old.seq)
    socks = burst_join(relay.port, "big", "a")
    try:
        last = old.seq + BURST
        await asyncio.gather(new.until(last), old.until(last))
        assert new.members == old.members and len(new.members) == BURST + 2
        assert new.diffs >= 1, "a burst of joins read in one turn reaches the new client coalesced"
        assert old.diffs == 0
        # The new client drops; more members join while it is away; it resumes.
        token, seen = welcome["resumeToken"], new.seq
        new.c.ws.transport.abort()
        socks += burst_join(relay.port, "big", "b")
        back = Member(await Client.connect(relay.ws), "big")
        back.seq, back.members = seen, set(new.members)
        again = await back.hello("new", capable=True, resume={"token": token, "sessions": {"big": seen}})
        assert again["resumed"] is True
        while True:
            msg = await back.c.recv(timeout=30)
            if msg["type"] == "session.resumed":
                assert msg["recovered"] is True and msg["seq"] == back.seq
                break
            assert msg["type"] != "participants.diff", "a replay is sent event by event"
            back.take(msg)
        await old.until(back.seq)
        assert back.members == old.members
        # Live again after the replay: one more burst, both still agree.
        socks += burst_join(relay.port, "big", "c")
        await asyncio.gather(back.until(old.seq + BURST), old.until(old.seq + BURST))
        assert back.seq == old.seq and back.members == old.members
    finally:
        for s in socks:
            s.close()
