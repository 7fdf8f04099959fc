"""Nobody is charged for the relay's own stalls (protocol/PROTOCOL.md §7): a canary
sending 10 messages a second — half its `--message-rate` — has a stall's backlog
arrive in one read; the rate window counts it as it was sent, so nothing is refused.
The stall is induced by stopping the relay process (SIGSTOP) for three seconds."""
from __future__ import annotations

import asyncio
import os
import signal

from relayclient import Client

RATE_PER_S = 10
STALL_S = 3.0


async def test_canary_is_not_refused_after_a_stall(relay_factory):
    r = relay_factory("--heartbeat-interval", "0")
    canary = await Client.connect(r.ws)
    await canary.hello_dev("canary")
    await canary.send({"type": "session.join", "session": "quiet"})
    await canary.recv_type("session.joined")
    sent = 0

    async def send_for(seconds: float):
        nonlocal sent
        for _ in range(int(seconds * RATE_PER_S)):
            await canary.send({"type": "message.send", "id": f"m{sent}", "session": "quiet", "data": sent})
            sent += 1
            await asyncio.sleep(1 / RATE_PER_S)  # the canary's pace, not a synchronisation

    await send_for(1.0)
    os.kill(r.proc.pid, signal.SIGSTOP)  # our own relay: the induced stall
    try:
        await send_for(STALL_S)
    finally:
        os.kill(r.proc.pid, signal.SIGCONT)
    await send_for(2.0)
    # Replies come in order, one per message (the library buffers them meanwhile).
    replies: dict[str, str] = {}
    while len(replies) < sent:
        m = await canary.recv(timeout=10)
        if m.get("re", "").startswith("m"):
            replies[m["re"]] = m["type"] if m["type"] == "ok" else m["code"]
    refused = [k for k, v in replies.items() if v != "ok"]
    assert not refused, f"{len(refused)} of {sent} refused: {sorted(set(replies.values()))}"
    await canary.close()
