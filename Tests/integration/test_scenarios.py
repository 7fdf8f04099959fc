"""One test per protocol/scenarios/*.json: replay it against a freshly started relay.

Each scenario runs on its own `relay serve` (dev mode, the scenario's `flags`),
started through the `relay_factory` fixture of conftest.py. The runner and the
scenario format: scenario_runner.py and protocol/scenarios/README.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import conftest
from scenario_runner import Schemas, load_scenarios, run_scenario, server_flags

SCENARIOS = load_scenarios()


@pytest.fixture(scope="module")
def schemas() -> Schemas:
    return Schemas()


def _binary_available() -> bool:
    try:
        conftest.relay_binary()
    except RuntimeError:
        return False
    return True


@pytest.mark.timeout(60)
@pytest.mark.parametrize("path", SCENARIOS, ids=[p.stem for p in SCENARIOS])
async def test_scenario(path: Path, relay_factory, schemas: Schemas) -> None:
    if not _binary_available():
        pytest.skip("relay binary not built (swift build) and RELAY_BIN not set")
    scenario = json.loads(path.read_text(encoding="utf-8"))
    relay = relay_factory(*server_flags(scenario))
    await run_scenario(scenario, relay.ws, schemas)


# --------------------------------------------------------------------------- runner self-tests
# The runner must catch what the scenarios cannot spell out: a fake server (not the
# relay) answers with scripted messages, and each broken one must fail the run.

from scenario_runner import ScenarioFailure  # noqa: E402

WELCOME = {
    "type": "welcome", "connectionId": "c1", "resumeToken": "r1",
    "user": {"uid": "alice", "name": "Alice", "role": "participant"},
    "heartbeat": {"interval": 10000, "timeout": 15000}, "resumed": False, "server": {"version": "fake"},
}
PARTICIPANT = {"uid": "alice", "name": "Alice", "role": "participant", "joinedAt": 1, "status": "connected"}
JOINED = {"type": "session.joined", "session": "r", "seq": 1, "self": PARTICIPANT, "participants": [PARTICIPANT], "hands": []}


def _hand(seq: int, raised_at: int = 5) -> dict:
    return {"type": "hand.raised", "session": "r", "seq": seq, "ts": 5, "uid": "alice", "name": "Alice", "raisedAt": raised_at}


async def _run_against_fake(replies: list[dict]) -> None:
    """hello → welcome; session.join → the scripted replies; the scenario expects them by type."""
    from websockets.asyncio.server import serve

    async def handler(ws):
        async for raw in ws:
            msg = json.loads(raw)
            if msg["type"] == "hello":
                await ws.send(json.dumps(WELCOME))
            else:
                for r in replies:
                    await ws.send(json.dumps(r))

    async with serve(handler, "127.0.0.1", 0, subprotocols=["relay.v1"]) as server:
        port = server.sockets[0].getsockname()[1]
        scenario = {
            "name": "self-test", "description": "fake server",
            "clients": {"alice": {"hello": {"dev": {"uid": "alice", "name": "Alice"}}}},
            "steps": [{"client": "alice", "send": {"type": "session.join", "session": "r"}}]
            + [{"client": "alice", "expect": {"type": r["type"]}} for r in replies],
        }
        await run_scenario(scenario, f"ws://127.0.0.1:{port}")


async def test_runner_accepts_a_correct_stream() -> None:
    await _run_against_fake([JOINED, _hand(2), {"type": "hand.lowered", "session": "r", "seq": 3, "ts": 6,
                                                "uid": "alice", "by": "alice", "reason": "self"}])


@pytest.mark.parametrize(
    "replies, complaint",
    [
        ([JOINED, _hand(3)], "gap or duplicate"),
        ([JOINED, _hand(2), _hand(2)], "gap or duplicate"),
        ([_hand(1)], "has not joined"),
        ([JOINED, _hand(2, raised_at=9), _hand(3, raised_at=8)], "earlier than the previous"),
        ([JOINED, {"type": "hand.raised", "session": "r", "seq": 2, "uid": "alice", "name": "A", "raisedAt": 1}], "'ts' is a required property"),
        ([{**JOINED, "seq": 0}], "schema violation"),
        ([JOINED, {"type": "hand.waved", "session": "r"}], "no event schema"),
    ],
    ids=["seq-gap", "seq-duplicate", "event-outside-membership", "raisedAt-decreasing", "missing-ts", "seq-zero", "unknown-type"],
)
async def test_runner_catches_broken_streams(replies: list[dict], complaint: str) -> None:
    with pytest.raises(ScenarioFailure, match=complaint):
        await _run_against_fake(replies)
