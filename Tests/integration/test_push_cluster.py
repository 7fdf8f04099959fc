"""Push in a 3-node cluster (PROTOCOL.md §9a, §12): exactly one push per device per
ring whichever node the caller, the callee and the registration used; a token a
provider calls gone is removed on every node; a node killed mid-ring changes nothing
the phone sees (one VoIP push, one missed-call alert)."""
from __future__ import annotations

import asyncio

import pytest

from cluster import cluster  # noqa: F401  (fixture)
from push_fakes import APNsFake
from test_push import TOKENS, call, device, killed, settle, wait_until

FLAGS = ["--node-timeout", "1500", "--heartbeat-interval", "1000", "--heartbeat-timeout", "4000", "--grace", "4000",
         "--idle-timeout", "600000"]


@pytest.fixture
def apns(tmp_path):
    fake = APNsFake(tmp_path / "apns")
    yield fake
    fake.stop()
    assert not fake.errors, fake.errors


def registrations(node) -> float:
    return node.metric("relay_push_registrations")


async def test_one_push_per_device_and_token_gone_everywhere(cluster, apns):
    n1, n2, n3 = [cluster.node(*FLAGS, *apns.flags()) for _ in range(3)]
    await killed(n1, "bob", "phone", TOKENS[0])
    await killed(n3, "bob", "ipad", TOKENS[1])
    await wait_until(lambda: all(registrations(n) == 2 for n in (n1, n2, n3)))
    alice = await device(n2, "alice", "a1")
    await call(alice, ["bob"])
    assert (await alice.recv_type("call.offline"))["pushed"] == 2
    await wait_until(lambda: len(apns.pushes()) >= 2)
    await settle(1.0)
    assert sorted(p.path[-64:] for p in apns.pushes()) == sorted(TOKENS[:2])  # once per device, not once per node
    apns.script.answer(TOKENS[0], ("status", 410, "Unregistered", None))
    carol = await device(n1, "carol", "c1")
    await call(carol, ["bob"])
    await wait_until(lambda: all(registrations(n) == 1 for n in (n1, n2, n3)))  # removed on every node
    dave = await device(n3, "dave", "d1")
    await call(dave, ["bob"])
    assert (await dave.recv_type("call.offline"))["pushed"] == 1


async def test_node_killed_mid_ring_still_one_push_and_one_follow_up(cluster, apns):
    n1, n2, n3 = [cluster.node(*FLAGS, *apns.flags(), "--ring-timeout", "3000") for _ in range(3)]
    await killed(n2, "bob", "phone", TOKENS[0], alert=TOKENS[1])
    await wait_until(lambda: all(registrations(n) == 2 for n in (n1, n2, n3)))
    alice = await device(n1, "alice", "a1")
    call_id = await call(alice, ["bob"])
    await wait_until(lambda: apns.pushes(push_type="voip"))
    n1.kill()  # the node where the call started and whose record asked for the push
    missed = await wait_until(lambda: apns.pushes(push_type="alert"), timeout=15)
    assert missed[0].json()["relay"]["callId"] == call_id
    assert missed[0].json()["relay"]["reason"] in ("unanswered", "caller_timed_out")
    await settle(4.0)  # another ring timeout: nothing more may come
    assert len(apns.pushes(push_type="voip")) == 1
    assert len(apns.pushes(push_type="alert")) == 1
