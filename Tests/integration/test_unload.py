"""protocol/ §5, §4 capability `resume.after_unload`: a browser closes a page's
WebSockets with 1001 when it unloads it (a reload too). For a client that offered the
capability, that close leaves its participant lost (hand and place kept for grace) and
the reloaded page resumes; for any other client, or any other close code, a close
frame is a clean leave as before."""
from __future__ import annotations

import pytest

from relayclient import Client

CAPABILITY = "resume.after_unload"


async def member(relay, uid: str, capabilities: list[str]) -> tuple[Client, dict]:
    c = await Client.connect(relay.ws)
    await c.send({"type": "hello", "id": "h", "dev": {"uid": uid, "name": uid}, "capabilities": capabilities})
    welcome = await c.recv_type("welcome")
    await c.send({"type": "session.join", "session": "room"})
    joined = await c.recv_type("session.joined")
    return c, {"welcome": welcome, "joined": joined}


async def status_event(observer: Client, uid: str) -> dict:
    while True:
        m = await observer.recv()
        if m["type"] in ("participant.lost", "participant.left") and m.get("uid") == uid:
            return m


async def test_a_page_unload_leaves_the_participant_lost_and_the_reload_resumes(relay_factory):
    relay = relay_factory()
    observer, _ = await member(relay, "obs", [])
    page, got = await member(relay, "page", [CAPABILITY])
    assert got["welcome"]["capabilities"] == [CAPABILITY]
    await page.send({"type": "hand.raise", "id": "r", "session": "room"})
    await page.recv_type("ok")
    seq = (await observer.recv_type("hand.raised"))["seq"]
    await page.ws.close(code=1001, reason="page unloaded")
    assert (await status_event(observer, "page"))["type"] == "participant.lost"

    reloaded = await Client.connect(relay.ws)
    resume = {"token": got["welcome"]["resumeToken"], "sessions": {"room": seq}}
    await reloaded.send({"type": "hello", "dev": {"uid": "page", "name": "page"}, "capabilities": [CAPABILITY], "resume": resume})
    assert (await reloaded.recv_type("welcome"))["resumed"] is True
    assert (await observer.recv_type("participant.restored"))["uid"] == "page"
    await reloaded.send({"type": "hand.lower", "id": "l", "session": "room"})
    assert (await reloaded.recv_type("ok"))["re"] == "l"  # the hand was still up


@pytest.mark.parametrize("capabilities,code", [([], 1001), ([CAPABILITY], 1000), ([CAPABILITY], 4000)])
async def test_other_closes_are_a_clean_leave(relay_factory, capabilities, code):
    relay = relay_factory()
    observer, _ = await member(relay, "obs", [])
    page, _ = await member(relay, "page", capabilities)
    await page.ws.close(code=code)
    event = await status_event(observer, "page")
    assert event["type"] == "participant.left" and event["reason"] == "left"
