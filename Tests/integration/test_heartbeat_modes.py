"""§5 heartbeats are node-local and the same in every mode: standalone, with
`--data-dir` (§12a) and clustered (§12). One machine in the shell pings each relay
socket and drops a silent one, which reaches the core as an ordinary unclean close.
A peer sees the silent client `participant.lost` within the heartbeat timeout plus
one check quantum (a tenth of the shorter setting) plus scheduling slack, and a
client that keeps answering pings is never lost, in each mode."""
from __future__ import annotations

import asyncio

import pytest

from cluster import Cluster
from durable import DurableRelay
from relayclient import Client
from test_liveness import RawClient, expect_nothing, join, pair

INTERVAL_MS = 300
TIMEOUT_MS = 900
QUANTUM_MS = min(INTERVAL_MS, TIMEOUT_MS) // 10
SLACK_S = 0.6  # a shared machine's scheduling noise; clustered, one log round trip more
FLAGS = ["--heartbeat-interval", str(INTERVAL_MS), "--heartbeat-timeout", str(TIMEOUT_MS),
         "--grace", "5000", "--idle-timeout", "600000"]
MODES = ["standalone", "data-dir", "cluster"]


class Target:
    """Where the clients connect: `.ws` and `.port` as the relay fixtures have them."""

    def __init__(self, ws: str, port: int):
        self.ws = ws
        self.port = port


@pytest.fixture
def relay_in_mode(request, relay_factory, tmp_path):
    mode = request.param
    if mode == "standalone":
        r = relay_factory(*FLAGS)
        yield Target(r.ws, r.port)
    elif mode == "data-dir":
        r = DurableRelay(tmp_path / "data", *FLAGS)
        try:
            yield Target(r.ws, r.port)
        finally:
            r.terminate()
    else:
        c = Cluster(tmp_path)
        try:
            n = c.node(*FLAGS, "--node-timeout", "1500")
            yield Target(n.ws, n.port)
        finally:
            c.stop()


@pytest.mark.parametrize("relay_in_mode", MODES, indirect=True)
async def test_silent_client_is_lost_within_timeout_and_quantum(relay_in_mode):
    alice, bob, welcome, _ = await pair(relay_in_mode)
    assert welcome["heartbeat"] == {"interval": INTERVAL_MS, "timeout": TIMEOUT_MS}
    # bob has just spoken (its join); from now on it neither reads nor answers pings.
    t0 = asyncio.get_running_loop().time()
    lost = await alice.recv_type("participant.lost", timeout=5)
    waited = asyncio.get_running_loop().time() - t0
    assert lost["uid"] == "bob"
    assert waited <= (TIMEOUT_MS + QUANTUM_MS) / 1000 + SLACK_S, waited
    # alice, whose library answers every ping, stays connected meanwhile.
    await alice.send({"type": "ping", "id": "p"})
    assert (await alice.recv_type("pong"))["re"] == "p"
    bob.abort()
    await alice.close()


@pytest.mark.parametrize("relay_in_mode", MODES, indirect=True)
async def test_client_answering_pings_is_never_lost(relay_in_mode):
    alice = await Client.connect(relay_in_mode.ws)
    await alice.hello_dev("alice")
    await join(alice)
    bob = await RawClient.connect(relay_in_mode.port)
    await bob.hello_dev("bob")
    await join(bob)
    assert (await alice.recv_type("participant.joined"))["participant"]["uid"] == "bob"
    # bob answers pings while it reads: three timeouts' worth, several pings, no loss.
    await expect_nothing(bob, 3 * TIMEOUT_MS / 1000)
    assert bob.pings >= 3 * TIMEOUT_MS // INTERVAL_MS - 2
    await expect_nothing(alice, 0.1)
    bob.abort()
    await alice.close()
