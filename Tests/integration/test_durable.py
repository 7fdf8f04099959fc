"""The durable single node (contract §12a, `--data-dir`): a restart by SIGTERM or
SIGKILL keeps sessions, hand queues in order, lost participants (resumed within grace
with exact replay), ringing calls with their timers, finished calls and push
registrations; time spent down counts."""
from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request

import pytest

from durable import DurableRelay
from test_liveness import Closed, RawClient

FLAGS = ["--heartbeat-interval", "1000", "--heartbeat-timeout", "4000", "--grace", "20000",
         "--idle-timeout", "600000"]


async def dev(relay, uid: str, resume: dict | None = None) -> tuple[RawClient, dict]:
    c = await RawClient.connect(relay.port)
    welcome = await c.hello_dev(uid, resume=resume)
    return c, welcome


async def join(c, session: str = "room") -> dict:
    await c.send({"type": "session.join", "id": "j-" + session, "session": session})
    return await c.recv_type("session.joined")


async def ok(c, command: dict) -> dict:
    await c.send(command)
    while True:
        m = await c.recv()
        if m.get("re") == command.get("id") and m["type"] in ("ok", "error"):
            assert m["type"] == "ok", m
            return m


async def replay_until_resumed(c) -> tuple[list[dict], dict]:
    events = []
    while True:
        m = await c.recv()
        if m["type"] == "session.resumed":
            return events, m
        events.append(m)


def restart(relay: DurableRelay, how: str, *flags: str) -> DurableRelay:
    if how == "kill":
        relay.kill()
    else:
        assert relay.terminate() == 0, relay.output()
    return DurableRelay(relay.data_dir, *flags)


@pytest.mark.parametrize("how", ["kill", "term"])
async def test_hands_and_resume_survive_a_restart(tmp_path, how):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    alice, _ = await dev(relay, "alice")
    await join(alice)
    bob, bob_welcome = await dev(relay, "bob")
    bob_joined = await join(bob)
    carol, carol_welcome = await dev(relay, "carol")
    carol_joined = await join(carol)
    for c, i in ((carol, "h1"), (alice, "h2"), (bob, "h3")):
        await ok(c, {"type": "hand.raise", "id": i, "session": "room"})
    await ok(alice, {"type": "message.send", "id": "m1", "session": "room", "data": {"n": 1}})
    hands_before = await bob.recv_type("message")
    relay = restart(relay, how, *FLAGS)
    # Bob resumes within grace: resumed, and every event since his seq, exactly.
    bob2, w = await dev(relay, "bob", resume={"token": bob_welcome["resumeToken"], "sessions": {"room": bob_joined["seq"]}})
    assert w["resumed"] is True, w
    events, resumed = await replay_until_resumed(bob2)
    assert resumed["recovered"] is True, resumed
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(bob_joined["seq"] + 1, bob_joined["seq"] + 1 + len(seqs))), events
    kinds = [e["type"] for e in events]
    assert kinds[:5] == ["participant.joined", "hand.raised", "hand.raised", "hand.raised", "message"], kinds
    assert "participant.lost" in kinds and kinds[-1] == "participant.restored", kinds
    assert resumed["seq"] == seqs[-1]
    # The hand queue is there, in order.
    carol2, w2 = await dev(relay, "carol", resume={"token": carol_welcome["resumeToken"], "sessions": {"room": carol_joined["seq"]}})
    assert w2["resumed"] is True
    await carol2.send({"type": "session.join", "id": "again", "session": "room"})
    snapshot = await carol2.recv_type("session.joined")
    assert [h["uid"] for h in snapshot["hands"]] == ["carol", "alice", "bob"], snapshot
    assert hands_before["data"] == {"n": 1}
    relay.terminate()


async def test_grace_that_passed_while_down_has_timed_out_at_start(tmp_path):
    flags = [*FLAGS[:-4], "--grace", "1500", "--idle-timeout", "600000"]
    relay = DurableRelay(tmp_path / "data", *flags)
    alice, alice_welcome = await dev(relay, "alice")
    alice_joined = await join(alice)
    bob, _ = await dev(relay, "bob")
    await join(bob)
    await ok(bob, {"type": "hand.raise", "id": "h", "session": "room"})
    relay.kill()
    await asyncio.sleep(2.0)  # the time spent down is what is tested: it must pass the grace
    relay = DurableRelay(relay.data_dir, *flags)
    carol, _ = await dev(relay, "carol")
    joined = await join(carol)
    assert [p["uid"] for p in joined["participants"]] == ["carol"] and joined["hands"] == [], joined
    back, w = await dev(relay, "alice", resume={"token": alice_welcome["resumeToken"], "sessions": {"room": alice_joined["seq"]}})
    assert w["resumed"] is False, w
    relay.terminate()
