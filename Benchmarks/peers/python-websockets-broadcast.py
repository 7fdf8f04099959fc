#!/usr/bin/env python3
"""Room broadcast WebSocket server for benchmarking relay-bots' --protocol broadcast.

ws://HOST:PORT/<room>: every text frame a client sends is delivered to every
client in that room, the sender included. A baseline for what a plain
broadcast costs in Python `websockets`, compared with the relay.
"""
from __future__ import annotations

import argparse
import asyncio
import signal

from websockets.asyncio.server import broadcast, serve

rooms: dict[str, set] = {}


async def handler(ws) -> None:
    room = ws.request.path
    members = rooms.setdefault(room, set())
    members.add(ws)
    try:
        async for message in ws:
            # broadcast() writes to each socket without awaiting: a slow
            # member is skipped rather than stalling the room.
            broadcast(members, message)
    finally:
        members.discard(ws)
        if not members:
            rooms.pop(room, None)


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--ping-interval", type=int, default=0,
                        help="ms between the library's own heartbeat pings (0: none)")
    args = parser.parse_args()
    stop = asyncio.get_running_loop().create_future()
    for sig in (signal.SIGTERM, signal.SIGINT):
        asyncio.get_running_loop().add_signal_handler(sig, stop.set_result, None)
    # No per-message compression, large queues: measure the broadcast, not the defaults.
    async with serve(handler, args.host, args.port, compression=None, max_size=1 << 20,
                     ping_interval=args.ping_interval / 1000 or None, max_queue=None):
        print(f"listening on ws://{args.host}:{args.port}", flush=True)
        await stop


if __name__ == "__main__":
    asyncio.run(main())
