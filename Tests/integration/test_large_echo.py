"""Echo of a message far larger than --max-outbound-bytes (contract §1: "any size
up to the limit"): a reader that keeps up is never closed as a slow consumer just
because one frame is bigger than the outbound cap."""
from __future__ import annotations

import asyncio
import os

import websockets


async def test_echo_of_8_mib_with_default_outbound_cap(relay_factory):
    r = relay_factory("--echo", "--max-message-bytes", str(16 << 20))
    payload = os.urandom(8 << 20)
    async with websockets.connect(r.ws + "/v1/echo", max_size=None, open_timeout=5) as ws:
        for _ in range(2):
            await ws.send(payload)
            echoed = await asyncio.wait_for(ws.recv(), 30)
            assert echoed == payload
