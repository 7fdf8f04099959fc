"""Cluster mode run as an operator runs it (docs/cluster.md; protocol/PROTOCOL.md §13.1):
bounded history with snapshots, Redis's clock only, crafted log records, a full or
evicting Redis, versions and shared flags, and a rolling upgrade — against a real
redis-server and real nodes."""
from __future__ import annotations

import asyncio
import os
import signal
import time

import pytest

from cluster import Cluster, _wait, cluster  # noqa: F401  (fixture)
from test_cluster import FLAGS, dev, join, nodes
from test_liveness import Closed, RawClient

GEN_KEY = "relay:{relay}:generation"

# A test copy of what the append script does (Sources/RelayClusterNode/ClusterNode+Append.swift):
# the synthetic writer appends records exactly as a node would.
WRITER = b"""
local now = redis.call('TIME')
local ms = string.format('%.0f', tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000))
local n = redis.call('INCR', KEYS[1])
return redis.call('XADD', KEYS[2], '*', 'e', ARGV[1], 'n', n, 't', ms)
"""


def beat(node: int) -> bytes:
    """A record batch (format 2) holding one `beat` of node `node`."""
    return bytes([2]) + node.to_bytes(4, "little") + (1).to_bytes(4, "little") + bytes([3])


def keys(cluster) -> dict[str, str]:
    g = cluster.redis.pipeline([[b"GET", GEN_KEY.encode()]])[0].decode()
    return {k: f"relay:{{relay}}:{k}:{g}" for k in ("log", "seq", "snapshot", "meta")}


def write_records(cluster, count: int, node: int = 1, chunk: int = 20_000) -> None:
    k = keys(cluster)
    sha = cluster.redis.pipeline([[b"SCRIPT", b"LOAD", WRITER]])[0]
    body = beat(node)
    for start in range(0, count, chunk):
        n = min(chunk, count - start)
        replies = cluster.redis.pipeline(
            [[b"EVALSHA", sha, b"2", k["seq"].encode(), k["log"].encode(), body]] * n)
        assert all(not r.startswith(b"-") for r in replies), replies[:3]


def xlen(cluster) -> int:
    reply = cluster.redis.pipeline([[b"XLEN", keys(cluster)["log"].encode()]])[0]
    return int(reply[1:])


def used_memory(cluster) -> int:
    info = cluster.redis.pipeline([[b"INFO", b"memory"]])[0].decode()
    return int(next(line.split(":")[1] for line in info.splitlines() if line.startswith("used_memory:")))


# --- bounded history ----------------------------------------------------------------------


async def test_history_is_bounded_and_a_node_joins_from_the_newest_snapshot(cluster):
    count = int(os.environ.get("RELAY_TEST_SYNTHETIC_RECORDS", "1000000"))
    n1 = cluster.node(*FLAGS, "--snapshot-records", "5000")
    alice = await dev(n1, "alice")
    await join(alice, "room")
    # Blocking work runs in threads: alice's client must keep answering pings meanwhile.
    await asyncio.to_thread(write_records, cluster, count)
    # n1 reads them all, snapshotting every 5 000 records and trimming behind.
    await asyncio.to_thread(_wait, lambda: n1.metric("relay_cluster_log_position") >= count, 300, "n1 caught up")
    await asyncio.to_thread(_wait, lambda: xlen(cluster) <= 2 * 5_000 + 100, 30, "log trimmed")
    assert used_memory(cluster) < 64 << 20
    started = time.monotonic()
    n2 = await asyncio.to_thread(cluster.node, *FLAGS, "--snapshot-records", "5000")
    ready_s = time.monotonic() - started
    print(f"node ready {ready_s:.2f} s after {count} records; log length {xlen(cluster)}")
    assert ready_s < 10  # the figure is in Benchmarks/results/cluster.md; this only catches a replay of history
    assert n2.metric("relay_cluster_snapshot_loads_total") >= 1
    # The state came with the snapshot: bob on n2 sees alice in the room.
    bob = await dev(n2, "bob")
    joined = await join(bob, "room")
    assert [p["uid"] for p in joined["participants"]] == ["alice", "bob"]


# --- untrusted records ----------------------------------------------------------------------


async def test_crafted_records_are_rejected_and_crash_nothing(cluster):
    n1, n2 = nodes(cluster, 2)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await dev(n2, "bob")
    await join(bob, "room")
    await alice.recv_type("participant.joined")
    k = keys(cluster)
    log = k["log"].encode()
    seq = int(cluster.redis.pipeline([[b"GET", k["seq"].encode()]])[0])
    garbage = [
        [b"XADD", log, b"*", b"x", b"y"],
        # Takes the next position: the legitimate record counted there must still apply.
        [b"XADD", log, b"*", b"e", b"\xff\x00garbage", b"n", b"%d" % (seq + 1), b"t", b"%d" % int(time.time() * 1000)],
        [b"XADD", log, b"*", b"e", beat(1), b"n", b"%d" % (seq + 1), b"t", b"99999999999999999"],
        [b"XADD", log, b"*", b"e", beat(1), b"n", b"-3", b"t", b"1"],
        [b"XADD", log, b"*", b"e", beat(77), b"n", b"%d" % seq, b"t", b"%d" % int(time.time() * 1000)],
        [b"XADD", log, b"*", b"e", beat(1), b"n", b"%d" % (seq - 1), b"t", b"%d" % int(time.time() * 1000)],
        [b"XADD", log, b"*", b"e", beat(1), b"n", b"%d" % (seq + 100_000), b"t", b"%d" % int(time.time() * 1000)],
        # An id far in the future freezes Redis's ids from then on: the log's clock
        # must not depend on them.
        [b"XADD", log, b"99999999999999-0", b"e", bytes([2, 1, 0, 0, 0, 9, 0, 0, 0, 6]) + bytes(8) + b"\x00\x00\x00\x00",
         b"n", b"x", b"t", b"1"],
    ]
    replies = cluster.redis.pipeline(garbage)
    assert all(not r.startswith(b"-") for r in replies), replies
    _wait(lambda: all(n.metric("relay_cluster_rejected_entries_total") >= 5 for n in (n1, n2)), 10,
          "crafted records rejected")
    # The cluster goes on: a message crosses nodes, a new node joins and replays them.
    await alice.send({"type": "message.send", "id": "m", "session": "room", "data": {"still": "here"}})
    assert (await bob.recv_type("message"))["data"] == {"still": "here"}
    n3 = cluster.node(*FLAGS)
    carol = await dev(n3, "carol")
    joined = await join(carol, "room")
    assert {p["uid"] for p in joined["participants"]} == {"alice", "bob", "carol"}
    for n in (n1, n2, n3):
        assert n.proc.poll() is None


# --- a full or evicting Redis --------------------------------------------------------------


async def test_a_full_redis_turns_readyz_503_and_recovers_with_no_ghost(cluster):
    n1, n2 = nodes(cluster, 2)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await RawClient.connect(n2.port)
    await bob.hello_dev("bob")
    await bob.send({"type": "session.join", "session": "room"})
    await bob.recv_type("session.joined")
    await alice.recv_type("participant.joined")
    used = used_memory(cluster)
    cluster.redis.pipeline([[b"CONFIG", b"SET", b"maxmemory-policy", b"noeviction"],
                            [b"CONFIG", b"SET", b"maxmemory", b"%d" % max(used // 2, 1 << 20)]])
    _wait(lambda: n1.readyz() == 503 and n2.readyz() == 503, 5, "both nodes not ready")
    assert n1.metric("relay_cluster_ready") == 0
    # Bob's socket ends meanwhile: his close cannot be logged yet.
    failures = n2.metric("relay_cluster_append_failures_total")
    bob.abort()
    _wait(lambda: n2.metric("relay_cluster_append_failures_total") > failures + 1, 5, "the close tried and failed")
    cluster.redis.pipeline([[b"CONFIG", b"SET", b"maxmemory", b"0"]])
    _wait(lambda: n1.readyz() == 200 and n2.readyz() == 200, 5, "both nodes ready again")
    # The close was retried until logged: bob is not a ghost "connected" participant.
    m = await alice.recv_type("participant.lost", timeout=10)
    assert m["uid"] == "bob"
    assert "cluster append failed" in n1.output() or "cluster append failed" in n2.output()


async def test_an_evicting_redis_is_refused_unless_vouched_for(cluster):
    cluster.redis.pipeline([[b"CONFIG", b"SET", b"maxmemory-policy", b"allkeys-lru"]])
    n = cluster.node(*FLAGS, wait=False)
    assert n.exit_code() != 0
    assert "maxmemory-policy is allkeys-lru" in n.output()
    cluster.node(*FLAGS, "--redis-skip-policy-check")


# --- one clock ----------------------------------------------------------------------------


async def test_a_node_with_a_skewed_clock_moves_no_timer(cluster):
    flags = [*FLAGS, "--ring-timeout", "5000"]
    n1 = cluster.node(*flags)
    skewed = cluster.node(*flags, prefix=["faketime", "-f", "+120s"])
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await dev(skewed, "bob")
    await join(bob, "room")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["bob"], "callType": "audio"})
    await alice.recv_type("ok")
    await bob.recv_type("call.incoming")
    # The skewed node logs something: no timer may expire because of its clock.
    await bob.send({"type": "message.send", "id": "m", "session": "room", "data": 1})
    message = await alice.recv_type("message")
    assert abs(message["ts"] - time.time() * 1000) < 10_000, "ts follows Redis's clock, not the node's"
    with pytest.raises((asyncio.TimeoutError, TimeoutError)):
        m = await bob.recv_type("call.cancelled", timeout=2.5)
        raise AssertionError(f"call ended early: {m}")
    cancelled = await bob.recv_type("call.cancelled", timeout=8)
    assert cancelled["reason"] == "unanswered"


# --- versions -----------------------------------------------------------------------------


async def test_a_node_with_other_shared_flags_refuses_to_join(cluster):
    nodes(cluster, 1)
    other = [*FLAGS[:FLAGS.index("--grace")], "--grace", "9000", *FLAGS[FLAGS.index("--grace") + 2:]]
    n = cluster.node(*other, wait=False)
    assert n.exit_code() != 0
    assert "shared flags" in n.output()


async def test_a_rolling_upgrade_keeps_every_session_and_ringing_call(cluster):
    flags = [*FLAGS, "--ring-timeout", "20000"]
    n1, n2 = cluster.node(*flags), cluster.node(*flags)
    alice = await RawClient.connect(n1.port)
    wa = await alice.hello_dev("alice")
    await alice.send({"type": "session.join", "session": "room"})
    ja = await alice.recv_type("session.joined")
    bob = await RawClient.connect(n2.port)
    wb = await bob.hello_dev("bob")
    await bob.send({"type": "session.join", "session": "room"})
    jb = await bob.recv_type("session.joined")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["bob"], "callType": "audio"})
    call = (await alice.recv_type("ok"))["callId"]
    await bob.recv_type("call.incoming")
    # A node of a later rules version arrives: the old generation hands over to it.
    # (Far above the binary's own version, so bumping that keeps this test meaningful.)
    new = cluster.node(*flags, env={"RELAY_TEST_RULES_VERSION": "1000"}, wait=False)
    with pytest.raises(Closed) as closed:
        await alice.recv_type("never", timeout=15)
    assert closed.value.code == 1012
    assert n1.exit_code() == 0 and n2.exit_code() == 0
    new.wait_ready()
    for c, w, j, uid in ((alice, wa, ja, "alice"), (bob, wb, jb, "bob")):
        again = await RawClient.connect(new.port)
        welcome = await again.hello_dev(uid, resume={"token": w["resumeToken"], "sessions": {"room": j["seq"]}})
        assert welcome["resumed"] is True
        resumed = await again.recv_type("session.resumed")
        assert resumed["recovered"] is True
        if uid == "bob":
            # The call still rings, and is answered on the new generation.
            await again.send({"type": "call.accept", "id": "a", "callId": call})
            assert (await again.recv_type("ok"))["re"] == "a"


async def test_a_node_that_lags_past_a_snapshot_rebuilds_without_resetting_the_cluster(cluster):
    flags = [*FLAGS[:FLAGS.index("--node-timeout")], "--node-timeout", "8000",
             *FLAGS[FLAGS.index("--node-timeout") + 2:], "--snapshot-records", "200"]
    n1, n2 = cluster.node(*flags), cluster.node(*flags)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    generation = cluster.redis.pipeline([[b"GET", GEN_KEY.encode()]])[0]
    # n2 stops reading while the log moves on by many snapshot intervals: what it has
    # not read is trimmed behind n1's snapshots.
    n2.signal(signal.SIGSTOP)
    await asyncio.to_thread(write_records, cluster, 3_000)
    await asyncio.to_thread(_wait, lambda: xlen(cluster) < 1_000, 20, "log trimmed")
    n2.signal(signal.SIGCONT)
    await asyncio.to_thread(_wait, lambda: "rebuilding this node's replica" in n2.output(), 20, "n2 rebuilt")
    await asyncio.to_thread(n2.wait_ready)
    assert cluster.redis.pipeline([[b"GET", GEN_KEY.encode()]])[0] == generation, "one slow node reset the cluster"
    assert n1.metric("relay_cluster_resets_total") == 0
    bob = await dev(n2, "bob")
    joined = await join(bob, "room")
    assert {p["uid"] for p in joined["participants"]} == {"alice", "bob"}
