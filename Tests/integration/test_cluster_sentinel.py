"""Redis high availability under Sentinel (contract §13.2, docs/cluster.md "Redis
high availability"): a primary, one replica and three sentinels on loopback ports,
three relay nodes on `redis+sentinel://…`.

- The primary SIGKILLed under relay-bots' load: every check stays green (seq
  continuity, one outcome per callee, deliveries), no session resets, every node
  reads 503 meanwhile and is ready again soon after a replica is back.
- The primary killed and never back: the promoted replica, which has no replica of
  its own, takes writes again within the bound (nothing lost, no reset).
- The replica down: appends wait for it, are answered `unavailable` once
  undecided past the limit, and nothing is applied until it is back; what was
  applied then is the same for everyone.
- A manual `SENTINEL FAILOVER`: the old primary becomes a replica, clients keep
  their sockets and sessions, `seq` goes on without a gap.
- With `--redis-min-replicas 0`, a failover to a replica that lacks records the
  nodes applied is detected: a new generation (1012, `resumed: false`), never a
  forked history.
"""
from __future__ import annotations

import asyncio
import threading
import time

import pytest

from cluster import MASTER_NAME, RedisHA, Node, _wait, redis_ha  # noqa: F401  (redis_ha: fixture)
from relayclient import Client
from test_bots import assert_clean
from test_cluster_failover import NODE_FLAGS, READY_TIMEOUT_S, BotsRun, counter

# Clients of the direct tests do not answer heartbeats while they wait: a long
# heartbeat timeout keeps the shell from closing them meanwhile.
CLIENT_FLAGS = ["--node-timeout", "1500", "--grace", "10000", "--heartbeat-interval", "1000",
                "--heartbeat-timeout", "60000"]
# The contract's bound after the cause of the outage is gone (a primary named and a
# replica holding the records): 2 s, plus 1 s for a loaded 2-core machine.
RESUME_S = 3.0


@pytest.fixture
def ha_nodes(redis_ha, tmp_path):
    """Starts nodes on the Sentinel URL; stops them all at the end."""
    started: list[Node] = []

    def make(*args: str, count: int = 3) -> list[Node]:
        for _ in range(count):
            started.append(Node(tmp_path, redis_ha.url, f"n{len(started) + 1}", list(args)))
        return started[-count:]

    yield make
    for n in started:
        n.stop()


class Readiness(threading.Thread):
    """Samples every node's /readyz every 50 ms: (monotonic time, node name, status)."""

    def __init__(self, nodes: list[Node]):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.samples: list[tuple[float, str, int]] = []
        self.done = threading.Event()

    def run(self) -> None:
        while not self.done.wait(0.05):  # a sampling period, not a synchronisation
            for n in self.nodes:
                try:
                    status = n.readyz()
                except OSError:
                    status = 0
                self.samples.append((time.monotonic(), n.name, status))

    def stop(self) -> None:
        self.done.set()
        self.join(timeout=5)

    def saw_unready(self, name: str, after: float) -> bool:
        return any(t >= after and n == name and s != 200 for t, n, s in self.samples)


def all_ready(nodes: list[Node]) -> bool:
    return all(n.readyz() == 200 for n in nodes)


def resets(nodes: list[Node]) -> float:
    return sum(counter(n, "relay_cluster_resets_total") for n in nodes)


def test_primary_killed_under_load(redis_ha, ha_nodes, tmp_path):
    nodes = ha_nodes(*NODE_FLAGS)
    urls = [a for n in nodes for a in ("--url", n.ws + "/v1/ws")]
    bots = BotsRun(tmp_path, "failover", "--dev", "--duration", "16000", *urls)
    watch = Readiness(nodes)
    try:
        bots.wait_running(READY_TIMEOUT_S)
        old, new = redis_ha.primary(), redis_ha.replica()
        watch.start()
        killed = time.monotonic()
        old.kill()
        _wait(lambda: redis_ha.named_by_all(new.port), 20, "the sentinels promoting the replica")
        promoted = time.monotonic()
        # The supervisor brings the old primary back as a replica of the new one:
        # with --redis-min-replicas 1 (the default) records count again only then.
        redis_ha.restart_as_replica(old, of=new)
        _wait(lambda: RedisHA.replica_online(new), 20, "the old primary in sync as a replica")
        synced = time.monotonic()
        _wait(lambda: all_ready(nodes), RESUME_S, "every node ready after the failover")
        ready = time.monotonic()
        proc, report = bots.finish(60)
    except BaseException:
        if bots.proc.poll() is None:
            bots.proc.kill()
            bots.proc.wait(timeout=5)
        raise
    finally:
        watch.stop()
    print(proc.stdout)  # the report table, shown with -s
    print(f"failover: promoted after {promoted - killed:.2f}s, replica in sync after {synced - killed:.2f}s, "
          f"ready after {ready - killed:.2f}s")
    detail = bots.detail() + "".join(f"\n--- {n.name} log:\n{n.output()}" for n in nodes)
    assert_clean(proc, report, detail)
    assert report["freshRejoins"] == 0, detail
    assert report["unresolvedLost"] == 0, detail
    assert report["checks"]["seq-continuity"]["checked"] > 0, detail
    assert resets(nodes) == 0, detail
    for n in nodes:
        assert watch.saw_unready(n.name, killed), f"{n.name} never answered 503 during the failover"
        assert "lacks records" not in n.output(), n.output()


async def _dev(node: Node, uid: str) -> Client:
    c = await Client.connect(node.ws)
    await c.hello_dev(uid)
    await c.send({"type": "session.join", "id": "j", "session": "room"})
    await c.recv_type("session.joined")
    return c


async def _send(c: Client, mid: str, data, timeout: float = 10.0) -> dict:
    """message.send; its reply (`ok` or `error`), skipping the events meanwhile."""
    await c.send({"type": "message.send", "id": mid, "session": "room", "data": data})
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        m = await c.recv(deadline - asyncio.get_running_loop().time())
        if m.get("re") == mid and m.get("type") in ("ok", "error"):
            return m


async def _messages(c: Client, quiet_s: float) -> list[tuple[int, object]]:
    """(seq, data) of the message events that arrive until `quiet_s` of silence."""
    out = []
    try:
        while True:
            m = await c.recv(quiet_s)
            if m.get("type") == "message":
                out.append((m["seq"], m.get("data")))
    except (asyncio.TimeoutError, TimeoutError):
        return out


async def _send_until_ok(c: Client, data, within_s: float) -> tuple[dict, float]:
    """Sends until one is `ok` (each failure must be `unavailable`); the reply and when."""
    deadline = time.monotonic() + within_s
    n = 0
    while True:
        n += 1
        reply = await _send(c, f"try-{n}", data)
        if reply["type"] == "ok":
            return reply, time.monotonic()
        assert reply["code"] == "unavailable", reply
        assert time.monotonic() < deadline, f"no ok within {within_s}s"
        await asyncio.sleep(0.1)  # pacing retries of a client, as a real one would


async def test_replica_down_means_unavailable_and_nothing_applied(redis_ha, ha_nodes):
    nodes = ha_nodes(*CLIENT_FLAGS)
    alice, bob = await _dev(nodes[0], "alice"), await _dev(nodes[2], "bob")
    assert (await _send(alice, "m1", "before"))["type"] == "ok"
    assert [d for _, d in await _messages(bob, 0.5)] == ["before"]
    replica = redis_ha.replica()
    replica.kill()
    # Undecided while no replica holds it: answered `unavailable` once the append
    # driver's undecided limit (10 s) passes without its record applied.
    reply = await _send(alice, "m2", "while the replica is down", timeout=20.0)
    assert reply["type"] == "error" and reply["code"] == "unavailable", reply
    # Nothing was applied: bob hears nothing, and every node reads 503.
    assert await _messages(bob, 1.5) == []
    _wait(lambda: all(n.readyz() == 503 for n in nodes), 3, "every node unready without its replica")
    replica.start()  # still configured as a replica of the primary
    _wait(lambda: RedisHA.replica_online(redis_ha.primary()), 20, "the replica back in sync")
    _wait(lambda: all_ready(nodes), RESUME_S, "every node ready with its replica back")
    await _send_until_ok(alice, "after", 5)
    # m2 may have been applied once the replica held it — for everyone, or for no one.
    seen_bob = await _messages(bob, 1.0)
    assert [d for _, d in seen_bob][-1] == "after", seen_bob
    assert [d for _, d in seen_bob].count("after") == 1, seen_bob
    seqs = [s for s, _ in seen_bob]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))) or len(seqs) == 1, seen_bob
    assert resets(nodes) == 0
    await alice.close()
    await bob.close()


async def test_cold_start_before_the_replica_syncs_acknowledges_nothing(redis_ha, tmp_path):
    """Nodes started while the only replica is down (as `docker compose up` starts
    them before its first sync) are held to --redis-min-replicas from their first
    append: no node turns ready and no command is answered `ok`; once the replica is
    in sync they serve, and what they acknowledge then is on the replica."""
    replica = redis_ha.replica()
    replica.kill()
    nodes = [Node(tmp_path, redis_ha.url, f"c{i}", CLIENT_FLAGS, wait=False) for i in (1, 2)]
    try:
        for n in nodes:
            _wait(lambda: n.healthz() == 200, 20, f"{n.name} serving HTTP")
        # Absence over a window: the node's first appends (its join) wait 1 s each
        # for a replica; three of them refused is what "not before" means here.
        deadline = time.monotonic() + 3.5
        while time.monotonic() < deadline:
            assert all(n.readyz() == 503 for n in nodes), [n.output() for n in nodes]
            await asyncio.sleep(0.25)  # a sampling period over the window, not a synchronisation
        for n in nodes:
            assert "NOREPLICAS" in n.output() or "replicas" in n.output(), n.output()
        replica.start()
        _wait(lambda: RedisHA.replica_online(redis_ha.primary()), 20, "the replica in sync")
        _wait(lambda: all_ready(nodes), 10, "every node ready once its replica holds the records")
        alice, bob = await _dev(nodes[0], "alice"), await _dev(nodes[1], "bob")
        assert (await _send(alice, "m1", "held by a replica"))["type"] == "ok"
        assert [d for _, d in await _messages(bob, 0.5)] == ["held by a replica"]
        await alice.close()
        await bob.close()
    finally:
        for n in nodes:
            n.stop()


async def test_primary_killed_and_not_back_writes_resume(redis_ha, ha_nodes):
    """No supervisor brings the dead primary back: the promoted replica has no replica
    of its own, and is held to the replicas it has had (none), so service resumes
    within the bound after the promotion, with nothing lost and no reset."""
    nodes = ha_nodes(*CLIENT_FLAGS)
    alice, bob = await _dev(nodes[0], "alice"), await _dev(nodes[2], "bob")
    assert (await _send(alice, "m1", "one"))["type"] == "ok"
    first = await _messages(bob, 0.5)
    assert [d for _, d in first] == ["one"]
    old, new = redis_ha.primary(), redis_ha.replica()
    old.kill()
    _wait(lambda: redis_ha.named_by_all(new.port), 20, "the sentinels promoting the replica")
    promoted = time.monotonic()
    _wait(lambda: all_ready(nodes), RESUME_S, "every node ready on the promoted replica alone")
    await _send_until_ok(alice, "two", RESUME_S)
    assert time.monotonic() - promoted <= RESUME_S
    # Tries answered `unavailable` may still take effect, for everyone: only "two"s.
    after = await _messages(bob, 1.0)
    assert after and {d for _, d in after} == {"two"}, after
    seqs = [s for s, _ in first + after]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # no gap, no reset
    assert resets(nodes) == 0
    await alice.close()
    await bob.close()


async def test_manual_failover_keeps_sessions(redis_ha, ha_nodes):
    nodes = ha_nodes(*CLIENT_FLAGS)
    alice, bob = await _dev(nodes[0], "alice"), await _dev(nodes[2], "bob")
    ok = await _send(alice, "m1", "one")
    assert ok["type"] == "ok", ok
    first = await _messages(bob, 0.5)
    assert [d for _, d in first] == ["one"]
    old, new = redis_ha.primary(), redis_ha.replica()
    assert redis_ha.sentinels[0].pipeline([[b"SENTINEL", b"FAILOVER", MASTER_NAME.encode()]]) == [b"+OK"]
    _wait(lambda: redis_ha.named_by_all(new.port), 20, "the sentinels promoting the replica")
    # The old primary is demoted by the sentinels into a replica of the new one.
    _wait(lambda: RedisHA.replica_online(new), 20, "the old primary in sync as a replica")
    assert old.command("ROLE").startswith("*"), "ROLE"
    assert b"role:slave" in old.pipeline([[b"INFO", b"replication"]])[0]
    _wait(lambda: all_ready(nodes), RESUME_S + 2, "every node ready after the failover")
    await _send_until_ok(alice, "two", 5)
    after = await _messages(bob, 1.0)
    assert [d for _, d in after][-1] == "two", after
    seqs = [s for s, _ in first + after]
    assert seqs == list(range(seqs[0], seqs[0] + len(seqs))), seqs  # no gap, no reset
    assert resets(nodes) == 0
    assert counter(nodes[0], "relay_cluster_live_nodes") == 3
    await alice.close()
    await bob.close()


async def test_failover_to_a_replica_behind_resets_the_generation(redis_ha, ha_nodes):
    """--redis-min-replicas 0 trades this guarantee for latency: a replica that died
    before the last records (and comes back with its older data) is promoted; the
    nodes find that the log lacks records they applied and start a new generation."""
    replica = redis_ha.replica()
    # The replica keeps its data across its restart, as a persistent replica would.
    replica.stop()
    replica.args += ["--appendonly", "yes", "--appendfsync", "always"]
    replica.start()
    _wait(lambda: RedisHA.replica_online(redis_ha.primary()), 20, "the replica in sync")
    nodes = ha_nodes(*CLIENT_FLAGS, "--redis-min-replicas", "0")
    alice, bob = await _dev(nodes[0], "alice"), await _dev(nodes[2], "bob")
    assert (await _send(alice, "m1", "replicated"))["type"] == "ok"
    primary = redis_ha.primary()
    _wait(lambda: RedisHA.replica_caught_up(primary, replica), 10, "the replica holding the record")
    replica.kill()
    for i in range(3):
        assert (await _send(alice, f"m{i + 2}", f"on the primary only {i}"))["type"] == "ok"
    assert len(await _messages(bob, 0.5)) == 4
    primary.kill()
    replica.start()  # its AOF: the log without the last records; still a replica of the dead primary
    _wait(lambda: redis_ha.named_by_all(replica.port), 30, "the sentinels promoting the stale replica")
    # Every node closes its clients with 1012 (a new generation), and they start afresh.
    assert await asyncio.wait_for(alice.expect_close(), 15) == 1012
    assert await asyncio.wait_for(bob.expect_close(), 5) == 1012
    _wait(lambda: all_ready(nodes), 10, "every node ready in the new generation")
    assert any("lacks records" in n.output() for n in nodes), "".join(n.output() for n in nodes)
    carol = await _dev(nodes[1], "carol")
    assert (await _send(carol, "c1", "fresh"))["type"] == "ok"
    await carol.close()


async def test_ringing_call_times_out_once_across_a_failover(redis_ha, ha_nodes):
    """A call rings through the primary's death: the ring timer is replicated state,
    timed by the log's clock, and fires once, on time, after the failover."""
    ring_ms = 6000
    nodes = ha_nodes(*CLIENT_FLAGS, "--ring-timeout", str(ring_ms))
    alice = await Client.connect(nodes[0].ws)
    await alice.hello_dev("alice")
    bob = await Client.connect(nodes[1].ws)
    await bob.hello_dev("bob")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["bob"], "callType": "audio"})
    call = (await alice.recv_type("ok"))["callId"]
    placed = time.monotonic()
    assert (await bob.recv_type("call.incoming"))["callId"] == call
    old, new = redis_ha.primary(), redis_ha.replica()
    old.kill()
    _wait(lambda: redis_ha.named_by_all(new.port), 20, "the sentinels promoting the replica")
    redis_ha.restart_as_replica(old, of=new)
    cancelled = await bob.recv_type("call.cancelled", timeout=ring_ms / 1000 + 10)
    assert cancelled["callId"] == call and cancelled["reason"] == "unanswered", cancelled
    assert time.monotonic() - placed >= ring_ms / 1000 - 0.5, "the ring timeout fired early"
    with pytest.raises((asyncio.TimeoutError, TimeoutError)):
        m = await bob.recv_type("call.cancelled", timeout=2)
        raise AssertionError(f"second outcome {m}")
    assert resets(nodes) == 0
    await alice.close()
    await bob.close()
