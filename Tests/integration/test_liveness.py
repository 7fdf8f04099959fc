"""Heartbeats, connection status, idle timeout (contract §5) and resume/replay (§8)
against the real binary over loopback.

Clients that must misbehave at the socket level (stop answering pings, vanish
without a close frame) are `RawClient`s: a minimal RFC 6455 client on asyncio
streams, because the `websockets` library answers pings by itself while its
reader runs. Every wait is bounded; nothing sleeps where a message can be awaited.
"""
from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct

import pytest

from relayclient import Client

TIMEOUT = 5.0

# Short timings (ms) so each test takes about a second or two.
HB = ["--heartbeat-interval", "200", "--heartbeat-timeout", "600"]
GRACE = ["--grace", "1000", "--background-grace", "3000"]
NO_IDLE = ["--idle-timeout", "600000"]
SLACK_S = 0.4  # scheduling slack on a shared machine


class Closed(Exception):
    def __init__(self, code: int):
        super().__init__(f"closed {code}")
        self.code = code


class RawClient:
    """A bare WebSocket client: answers pings only while `recv` runs, can go silent,
    can vanish without a close frame."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.reader = reader
        self.writer = writer
        self.pings = 0

    @classmethod
    async def connect(cls, port: int) -> "RawClient":
        reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), TIMEOUT)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write(
            (
                f"GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Protocol: relay.v1\r\n\r\n"
            ).encode()
        )
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), TIMEOUT)
        assert b" 101 " in head.split(b"\r\n", 1)[0], head
        return cls(reader, writer)

    def send_frame(self, opcode: int, payload: bytes) -> None:
        mask = os.urandom(4)
        n = len(payload)
        if n < 126:
            head = struct.pack("!BB", 0x80 | opcode, 0x80 | n)
        elif n < 65536:
            head = struct.pack("!BBH", 0x80 | opcode, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", 0x80 | opcode, 0x80 | 127, n)
        self.writer.write(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload)))

    async def send(self, obj: dict) -> None:
        self.send_frame(0x1, json.dumps(obj).encode())
        await self.writer.drain()

    async def _frame(self) -> tuple[int, bytes]:
        b0, b1 = await self.reader.readexactly(2)
        n = b1 & 0x7F
        if n == 126:
            (n,) = struct.unpack("!H", await self.reader.readexactly(2))
        elif n == 127:
            (n,) = struct.unpack("!Q", await self.reader.readexactly(8))
        return b0 & 0x0F, await self.reader.readexactly(n)

    async def recv(self, timeout: float = TIMEOUT) -> dict:
        """Next text message; pings are answered on the way, a close raises Closed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                opcode, payload = await asyncio.wait_for(self._frame(), max(0.0, deadline - loop.time()))
            except asyncio.IncompleteReadError:
                raise Closed(1006)
            if opcode == 0x9:
                self.pings += 1
                self.send_frame(0xA, payload)
            elif opcode == 0x8:
                raise Closed(struct.unpack("!H", payload[:2])[0] if len(payload) >= 2 else 1005)
            elif opcode == 0x1:
                return json.loads(payload)

    async def recv_type(self, type_: str, timeout: float = TIMEOUT) -> dict:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            msg = await self.recv(max(0.0, deadline - loop.time()))
            if msg.get("type") == type_:
                return msg

    async def hello_dev(self, uid: str, resume: dict | None = None) -> dict:
        hello = {"type": "hello", "dev": {"uid": uid, "name": uid.title()}}
        if resume:
            hello["resume"] = resume
        await self.send(hello)
        return await self.recv_type("welcome")

    def abort(self) -> None:
        """Vanish: RST, no close frame (the server sees an unclean end)."""
        sock = self.writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.writer.transport.abort()


async def join(client, session: str = "room") -> dict:
    await client.send({"type": "session.join", "id": "j", "session": session})
    return await client.recv_type("session.joined")


async def pair(relay, bob_uid: str = "bob"):
    """alice (websockets, answers pings) and bob (raw) in "room"; alice has seen bob join."""
    alice = await Client.connect(relay.ws)
    await alice.hello_dev("alice")
    await join(alice)
    bob = await RawClient.connect(relay.port)
    welcome = await bob.hello_dev(bob_uid)
    joined = await join(bob)
    seen = await alice.recv()
    assert seen["type"] == "participant.joined" and seen["participant"]["uid"] == bob_uid
    return alice, bob, welcome, joined


async def expect_nothing(client, seconds: float = 0.3) -> None:
    """A bounded negative check, not a synchronisation sleep."""
    with pytest.raises((asyncio.TimeoutError, TimeoutError)):
        msg = await client.recv(seconds)
        pytest.fail(f"unexpected {msg}")


def elapsed_since(t0: float) -> float:
    return asyncio.get_running_loop().time() - t0


# --- §5 heartbeats --------------------------------------------------------------


async def test_server_pings_every_interval_and_answering_keeps_the_connection(relay_factory):
    relay = relay_factory(*HB, *GRACE, *NO_IDLE)
    alice, bob, welcome, _ = await pair(relay)
    assert welcome["heartbeat"] == {"interval": 200, "timeout": 600}
    # bob answers pings while it reads: ~1.5 s = 4 timeouts, never lost.
    await expect_nothing(bob, 1.5)
    assert 4 <= bob.pings <= 10
    await expect_nothing(alice, 0.1)


async def test_silent_client_is_lost_then_hand_lowered_then_timed_out(relay_factory):
    relay = relay_factory(*HB, *GRACE, *NO_IDLE)
    alice, bob, _, _ = await pair(relay)
    await bob.send({"type": "hand.raise", "session": "room"})
    assert (await alice.recv())["type"] == "hand.raised"
    # bob goes silent: stops reading and sending (pings unanswered).
    t0 = asyncio.get_running_loop().time()
    lost = await alice.recv(TIMEOUT)
    t_lost = elapsed_since(t0)
    assert lost["type"] == "participant.lost" and lost["uid"] == "bob"
    assert t_lost <= 0.6 + 0.2 + SLACK_S, t_lost  # timeout + one interval
    lowered = await alice.recv(TIMEOUT)
    t_out = elapsed_since(t0)
    assert lowered["type"] == "hand.lowered"
    assert lowered["uid"] == "bob" and lowered["reason"] == "timed_out" and lowered["by"] is None
    timed_out = await alice.recv(1.0)
    assert timed_out["type"] == "participant.timed_out" and timed_out["uid"] == "bob"
    assert timed_out["seq"] == lowered["seq"] + 1 == lost["seq"] + 2
    assert 1.0 - 0.05 <= t_out - t_lost <= 1.0 + SLACK_S, (t_lost, t_out)
    bob.abort()


async def test_abrupt_close_is_lost_not_left(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice, bob, _, _ = await pair(relay)
    bob.abort()
    lost = await alice.recv()
    assert lost["type"] == "participant.lost" and lost["uid"] == "bob"
    await expect_nothing(alice, 0.5)  # still within grace: no left, no timed_out
    assert (await alice.recv(1.5))["type"] == "participant.timed_out"


async def test_clean_close_is_left_at_once(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice = await Client.connect(relay.ws)
    await alice.hello_dev("alice")
    await join(alice)
    bob = await Client.connect(relay.ws)
    await bob.hello_dev("bob")
    await join(bob)
    assert (await alice.recv())["type"] == "participant.joined"
    await bob.close()
    left = await alice.recv()
    assert left["type"] == "participant.left" and left["uid"] == "bob" and left["reason"] == "left"
    await expect_nothing(alice, 1.3)  # never lost, never timed out


async def test_background_grace_is_honoured(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice, bob, _, _ = await pair(relay)
    await bob.send({"type": "client.background", "id": "bg", "background": True})
    assert (await bob.recv())["type"] == "ok"
    bob.abort()
    assert (await alice.recv())["type"] == "participant.lost"
    t0 = asyncio.get_running_loop().time()
    await expect_nothing(alice, 1.5)  # past --grace 1000
    timed_out = await alice.recv(3.0)
    assert timed_out["type"] == "participant.timed_out"
    assert 3.0 - 0.05 <= elapsed_since(t0) <= 3.0 + SLACK_S


async def test_rejoin_from_new_connection_within_grace_restores(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice, bob, _, _ = await pair(relay)
    bob.abort()
    lost = await alice.recv()
    bob2 = await Client.connect(relay.ws)
    await bob2.hello_dev("bob")
    joined = await join(bob2)
    restored = await alice.recv()
    assert restored["type"] == "participant.restored" and restored["seq"] == lost["seq"] + 1
    assert joined["seq"] == restored["seq"]
    await expect_nothing(alice, 1.3)  # the old grace ends without effect


# --- §8 resume --------------------------------------------------------------------


async def test_resume_within_grace_replays_exactly_the_missed_events(relay_factory):
    relay = relay_factory("--grace", "5000", *NO_IDLE)
    alice, bob, welcome, joined = await pair(relay)
    await bob.send({"type": "hand.raise", "session": "room"})
    raised = await bob.recv_type("hand.raised")
    assert (await alice.recv())["seq"] == raised["seq"]
    last_seq = raised["seq"]
    bob.abort()
    lost = await alice.recv()
    assert lost["type"] == "participant.lost"
    missed = [lost]
    for i in range(3):
        await alice.send({"type": "message.send", "session": "room", "data": {"n": i}})
        missed.append(await alice.recv())
    bob2 = await RawClient.connect(relay.port)
    resume = {"token": welcome["resumeToken"], "sessions": {"room": last_seq}}
    w2 = await bob2.hello_dev("bob", resume)
    assert w2["resumed"] is True and w2["resumeToken"] != welcome["resumeToken"]
    restored = await alice.recv()
    assert restored["type"] == "participant.restored" and restored["uid"] == "bob"
    replay = [await bob2.recv() for _ in range(len(missed) + 1)]
    assert replay == missed + [restored]  # byte-for-byte the events members saw, own ones included
    done = await bob2.recv()
    assert done == {"type": "session.resumed", "session": "room", "recovered": True, "seq": restored["seq"]}
    # The live stream continues with the next seq: no gap, no duplicate.
    await alice.send({"type": "message.send", "session": "room", "data": "live"})
    live = await bob2.recv()
    assert live["type"] == "message" and live["seq"] == restored["seq"] + 1
    # The hand was kept during grace.
    await bob2.send({"type": "hand.lower", "id": "l", "session": "room"})
    assert (await bob2.recv()) == {"type": "ok", "re": "l"}
    assert (await bob2.recv())["type"] == "hand.lowered"


async def test_resume_while_old_connection_open_closes_it_4509(relay_factory):
    relay = relay_factory(*NO_IDLE)
    alice, bob, welcome, joined = await pair(relay)
    bob2 = await RawClient.connect(relay.port)
    w2 = await bob2.hello_dev("bob", {"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w2["resumed"] is True
    with pytest.raises(Closed) as closed:
        await bob.recv()
    assert closed.value.code == 4509
    assert (await bob2.recv()) == {"type": "session.resumed", "session": "room", "recovered": True, "seq": joined["seq"]}
    await expect_nothing(alice, 0.3)  # bob was not lost: no participant.restored


async def test_resume_after_grace_is_not_resumed(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice, bob, welcome, joined = await pair(relay)
    bob.abort()
    assert (await alice.recv())["type"] == "participant.lost"
    assert (await alice.recv(3.0))["type"] == "participant.timed_out"
    bob2 = await RawClient.connect(relay.port)
    w2 = await bob2.hello_dev("bob", {"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w2["resumed"] is False
    await expect_nothing(bob2, 0.3)  # no replay: the client joins afresh


async def test_resume_older_than_the_buffer_gets_a_fresh_snapshot(relay_factory):
    relay = relay_factory("--replay-events", "3", "--grace", "5000", *NO_IDLE)
    alice, bob, welcome, joined = await pair(relay)
    bob.abort()
    assert (await alice.recv())["type"] == "participant.lost"
    for i in range(4):
        await alice.send({"type": "message.send", "session": "room", "data": i})
        await alice.recv()
    bob2 = await RawClient.connect(relay.port)
    w2 = await bob2.hello_dev("bob", {"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w2["resumed"] is True
    restored = await alice.recv()
    assert restored["type"] == "participant.restored"
    snap = await bob2.recv()
    assert snap["type"] == "session.joined" and snap["recovered"] is False
    assert snap["seq"] == restored["seq"]
    assert [(p["uid"], p["status"]) for p in snap["participants"]] == [("alice", "connected"), ("bob", "connected")]


async def test_foreign_resume_token_is_not_resumed(relay_factory):
    relay = relay_factory(*GRACE, *NO_IDLE)
    alice, bob, welcome, joined = await pair(relay)
    bob.abort()
    assert (await alice.recv())["type"] == "participant.lost"
    mallory = await RawClient.connect(relay.port)
    w = await mallory.hello_dev("mallory", {"token": welcome["resumeToken"], "sessions": {"room": 0}})
    assert w["resumed"] is False
    await expect_nothing(alice, 0.2)


# --- §5 idle timeout ----------------------------------------------------------------


async def test_idle_warning_then_timeout(relay_factory):
    relay = relay_factory("--idle-timeout", "1500")
    alice = await Client.connect(relay.ws)
    await alice.hello_dev("alice")
    joined = await join(alice)
    t0 = asyncio.get_running_loop().time()
    warning = await alice.recv(1.0)  # 1 500 < 60 000: at once
    assert warning["type"] == "session.idle_warning" and warning["session"] == "room"
    assert elapsed_since(t0) <= SLACK_S
    assert abs(warning["timeoutAt"] - (joined["self"]["joinedAt"] + 1500)) <= 100
    timed_out = await alice.recv(3.0)
    assert timed_out == {"type": "session.timed_out", "session": "room"}
    assert 1.5 - 0.1 <= elapsed_since(t0) <= 1.5 + SLACK_S
    await alice.send({"type": "message.send", "id": "m", "session": "room", "data": 1})
    err = await alice.recv()
    assert err["type"] == "error" and err["code"] == "not_in_session"


async def test_joining_cancels_the_idle_countdown(relay_factory):
    relay = relay_factory("--idle-timeout", "1500")
    alice = await Client.connect(relay.ws)
    await alice.hello_dev("alice")
    await join(alice)
    assert (await alice.recv(1.0))["type"] == "session.idle_warning"
    bob = await Client.connect(relay.ws)
    await bob.hello_dev("bob")
    await join(bob)
    assert (await alice.recv())["type"] == "participant.joined"
    await expect_nothing(alice, 2.0)  # past the original timeout: nobody removed
