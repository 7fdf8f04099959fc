"""Cluster mode (contract §12) against a real redis-server and several real nodes:
events, hands and snapshots agree across nodes; calls ring everywhere and the first
accept wins; resume works on any node; node death, drain, Redis death and a wiped
Redis are survived as the contract says."""
from __future__ import annotations

import asyncio
import json
import signal
import time
import urllib.error
import urllib.request

import pytest

from cluster import Cluster, Node, cluster  # noqa: F401  (fixture)
from relayclient import Client, claims, make_jwt
from test_liveness import Closed, RawClient
from test_webhook import Receiver, receiver_factory  # noqa: F401  (fixture)

SECRET = "cluster-secret"
ADMIN = "cluster-admin"
NODE_TIMEOUT_MS = 1500
# Short timings (ms); heartbeats stay well above the scheduling noise of a shared
# machine, since clients here answer pings only while they read.
FLAGS = ["--node-timeout", str(NODE_TIMEOUT_MS), "--heartbeat-interval", "1000", "--heartbeat-timeout", "4000",
         "--grace", "4000", "--idle-timeout", "600000", "--admin-key", ADMIN]


def nodes(cluster, count: int = 3, *extra: str):
    return [cluster.node(*FLAGS, *extra) for _ in range(count)]


async def dev(node, uid: str, role: str | None = None) -> Client:
    c = await Client.connect(node.ws)
    await c.hello_dev(uid, role=role)
    return c


async def join(c, session: str) -> dict:
    await c.send({"type": "session.join", "id": "j-" + session, "session": session})
    return await c.recv_type("session.joined")


async def session_events(c, count: int, timeout: float = 5.0) -> list[dict]:
    out = []
    while len(out) < count:
        m = await c.recv(timeout)
        if "seq" in m and m.get("type") not in ("session.joined", "session.resumed"):
            out.append(m)
    return out


def http(node, method: str, path: str, body: dict | None = None, token: str | None = ADMIN):
    req = urllib.request.Request(node.http + path, method=method,
                                 data=json.dumps(body).encode() if body is not None else None)
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read() or b"null")
    except urllib.error.HTTPError as e:
        raw = e.read()
        return e.code, json.loads(raw) if raw else None


# --- one relay across nodes -----------------------------------------------------------


async def test_members_on_three_nodes_see_one_ordered_stream(cluster):
    n1, n2, n3 = nodes(cluster)
    a, b, c = await dev(n1, "alice"), await dev(n2, "bob"), await dev(n3, "carol")
    await join(a, "room")
    await join(b, "room")
    snap = await join(c, "room")
    assert [p["uid"] for p in snap["participants"]] == ["alice", "bob", "carol"]
    assert snap["seq"] == 3
    # Commands from every node, interleaved: every member sees the same events in
    # the same seq order, no gap, no duplicate.
    await c.send({"type": "hand.raise", "session": "room"})
    await a.send({"type": "hand.raise", "session": "room"})
    await b.send({"type": "message.send", "session": "room", "data": {"n": 1}})
    await b.send({"type": "hand.raise", "session": "room"})
    seen = []
    for client, skip in ((a, 2), (b, 1), (c, 0)):
        events = await session_events(client, skip + 4)
        seen.append([(e["seq"], e["type"], e.get("uid") or e.get("from") or e["participant"]["uid"])
                     for e in events[skip:]])
    assert seen[0] == seen[1] == seen[2]
    assert [s for s, _, _ in seen[0]] == [4, 5, 6, 7]
    # Same queue and participants in every node's admin view.
    views = [http(n, "GET", "/v1/sessions/room")[1] for n in (n1, n2, n3)]
    assert views[0] == views[1] == views[2]
    assert [h["uid"] for h in views[0]["hands"]] == [u for _, t, u in seen[0] if t == "hand.raised"]
    # A late joiner on any node gets the same snapshot.
    d = await dev(n2, "dave")
    late = await join(d, "room")
    assert [h["uid"] for h in late["hands"]] == [h["uid"] for h in views[0]["hands"]]


async def test_admin_api_on_any_node(cluster):
    n1, n2, n3 = nodes(cluster, 3, "--secret", SECRET)
    status, body = http(n1, "POST", "/v1/sessions", token=ADMIN)
    assert status == 200
    sid = body["sessionId"]
    tok = make_jwt(SECRET, claims("alice", sessions=[sid]))
    a = await Client.connect(n2.ws)
    assert (await a.hello_token(tok))["type"] == "welcome"
    assert (await join(a, sid))["seq"] == 1
    assert http(n3, "GET", f"/v1/sessions/{sid}", token=ADMIN)[1]["participants"][0]["uid"] == "alice"
    status, _ = http(n3, "DELETE", f"/v1/sessions/{sid}/participants/alice", token=ADMIN)
    assert status == 200
    left = await a.recv_type("session.left")
    assert left["reason"] == "removed"
    assert http(n1, "DELETE", f"/v1/sessions/{sid}/participants/alice", token=ADMIN)[0] == 404


# --- calls ------------------------------------------------------------------------------


async def test_calls_ring_every_device_and_first_accept_wins(cluster):
    n1, n2, n3 = nodes(cluster)
    alice = await dev(n1, "alice")
    bob_phone, bob_laptop = await dev(n2, "bob"), await dev(n3, "bob")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["bob"], "callType": "audio"})
    ok = await alice.recv_type("ok")
    call = ok["callId"]
    assert (await bob_phone.recv_type("call.incoming"))["callId"] == call
    assert (await bob_laptop.recv_type("call.incoming"))["callId"] == call
    # Both devices accept at once, on different nodes: exactly one wins.
    await bob_phone.send({"type": "call.accept", "id": "a1", "callId": call})
    await bob_laptop.send({"type": "call.accept", "id": "a2", "callId": call})
    outcomes, seen = {}, {"phone": [], "laptop": []}
    for name, device in (("phone", bob_phone), ("laptop", bob_laptop)):
        while name not in outcomes:
            m = await device.recv()
            seen[name].append(m)
            if m["type"] == "ok":
                outcomes[name] = "won"
            elif m["type"] == "error":
                outcomes[name] = m["code"]
    assert sorted(outcomes.values()) == ["conflict", "won"], outcomes
    loser = "laptop" if outcomes["laptop"] == "conflict" else "phone"
    cancelled = [m for m in seen[loser] if m["type"] == "call.cancelled"]
    if not cancelled:
        cancelled = [await (bob_laptop if loser == "laptop" else bob_phone).recv_type("call.cancelled")]
    assert cancelled[0]["reason"] == "answered_elsewhere"
    assert (await alice.recv_type("call.accepted"))["uid"] == "bob"
    # Busy sees the accepted call from any node.
    carol = await dev(n3, "carol")
    await carol.send({"type": "call.initiate", "id": "c2", "to": ["bob"], "callType": "video"})
    busy = await carol.recv_type("call.busy")
    assert busy["uid"] == "bob"


async def test_ring_timeout_fires_once_after_the_callers_node_dies(cluster):
    n1, n2, n3 = nodes(cluster, 3, "--ring-timeout", "3000")
    alice = await dev(n1, "alice")
    bob = await RawClient.connect(n2.port)
    await bob.hello_dev("bob")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["bob"], "callType": "audio"})
    call = (await alice.recv_type("ok"))["callId"]
    assert (await bob.recv_type("call.incoming"))["callId"] == call
    n1.kill()  # the node where the call started
    cancelled = await bob.recv_type("call.cancelled", timeout=10)
    assert cancelled["callId"] == call
    assert cancelled["reason"] in ("unanswered", "caller_timed_out")
    # Exactly once: nothing more about this call within another ring timeout.
    with pytest.raises((asyncio.TimeoutError, TimeoutError)):
        m = await bob.recv_type("call.cancelled", timeout=3.5)
        raise AssertionError(f"second outcome {m}")


# --- resume ---------------------------------------------------------------------------


async def test_resume_on_another_node_replays_exactly(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await RawClient.connect(n1.port)
    welcome = await bob.hello_dev("bob")
    await bob.send({"type": "session.join", "session": "room"})
    joined = await bob.recv_type("session.joined")
    bob.abort()
    await alice.recv_type("participant.lost", timeout=10)
    for i in range(3):
        await alice.send({"type": "message.send", "session": "room", "data": i})
    # Bob comes back through another node with the token issued by the first.
    bob2 = await RawClient.connect(n2.port)
    w2 = await bob2.hello_dev("bob", resume={"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w2["resumed"] is True
    replay = []
    while True:
        m = await bob2.recv()
        if m["type"] == "session.resumed":
            break
        replay.append(m)
    assert m["recovered"] is True
    seqs = [e["seq"] for e in replay]
    assert seqs == list(range(joined["seq"] + 1, joined["seq"] + 1 + len(seqs)))
    assert [e["type"] for e in replay] == ["participant.lost", "message", "message", "message", "participant.restored"]
    assert m["seq"] == seqs[-1]


# --- webhooks ---------------------------------------------------------------------------


async def test_each_webhook_is_posted_once_by_the_cluster(cluster, receiver_factory):
    receiver = receiver_factory()
    hook = ["--webhook-url", receiver.url, "--webhook-secret", "s"]
    n1, n2, n3 = nodes(cluster, 3, *hook)
    alice = await dev(n2, "alice")
    await alice.send({"type": "call.initiate", "id": "c", "to": ["offline-bob"], "callType": "audio"})
    call = (await alice.recv_type("ok"))["callId"]
    await alice.recv_type("call.offline")
    await alice.send({"type": "call.cancel", "id": "x", "callId": call})
    await alice.recv_type("ok")
    receiver.wait_for(2)
    # A duplicate would come from another node about as fast as the first POST; a
    # marker event logged after both shows every node has applied them by then.
    await alice.send({"type": "call.initiate", "id": "m", "to": ["offline-carol"], "callType": "audio"})
    receiver.wait_for(3)
    time.sleep(0.5)  # duplicates have no event of their own to await
    events = [h["X-Relay-Event"] for h, _, _ in receiver.requests]
    assert events.count("call.offline") == 2, events
    assert events.count("call.cancelled") == 1, events


# --- node death, drain, partitions ------------------------------------------------------


async def test_killed_node_users_are_lost_in_time_then_timed_out(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await dev(n2, "bob")
    await join(bob, "room")
    await alice.recv_type("participant.joined")
    await bob.send({"type": "hand.raise", "session": "room"})
    await alice.recv_type("hand.raised")
    killed = time.monotonic()
    n2.kill()
    lost = await alice.recv_type("participant.lost", timeout=NODE_TIMEOUT_MS / 1000 + 4)
    elapsed = time.monotonic() - killed
    assert lost["uid"] == "bob"
    assert elapsed <= NODE_TIMEOUT_MS / 1000 + 2.0, elapsed
    # Grace then runs at the survivors: hand lowered, timed out.
    lowered = await alice.recv_type("hand.lowered", timeout=8)
    assert lowered["reason"] == "timed_out"
    assert (await alice.recv_type("participant.timed_out", timeout=2))["uid"] == "bob"


async def test_drained_node_clients_get_1001_and_resume_elsewhere(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await RawClient.connect(n2.port)
    welcome = await bob.hello_dev("bob")
    await bob.send({"type": "session.join", "session": "room"})
    joined = await bob.recv_type("session.joined")
    n2.signal(signal.SIGTERM)
    with pytest.raises(Closed) as closed:
        await bob.recv(timeout=10)
    assert closed.value.code == 1001
    bob2 = await RawClient.connect(n1.port)
    w = await bob2.hello_dev("bob", resume={"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w["resumed"] is True
    m = await bob2.recv_type("session.resumed")
    assert m["recovered"] is True
    assert n2.proc.wait(timeout=15) == 0


async def test_paused_node_cannot_write_with_its_old_identity(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    bob = await RawClient.connect(n2.port)
    await bob.hello_dev("bob")
    await bob.send({"type": "session.join", "session": "room"})
    await bob.recv_type("session.joined")
    await alice.recv_type("participant.joined")
    n2.signal(signal.SIGSTOP)
    try:
        assert (await alice.recv_type("participant.lost", timeout=NODE_TIMEOUT_MS / 1000 + 4))["uid"] == "bob"
        # Written while paused, delivered when it wakes: must change nothing.
        await bob.send({"type": "hand.raise", "session": "room"})
    finally:
        n2.signal(signal.SIGCONT)
    # The node finds it was declared dead: its sockets are closed to reconnect.
    with pytest.raises(Closed) as closed:
        while True:
            await bob.recv(timeout=10)
    assert closed.value.code == 1012
    n2.wait_ready(10)
    view = http(n1, "GET", "/v1/sessions/room")[1]
    assert view["hands"] == []
    assert [p["status"] for p in view["participants"] if p["uid"] == "bob"] == ["lost"]


# --- Redis faults -----------------------------------------------------------------------


async def test_redis_down_means_unavailable_then_recovery(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    cluster.redis.kill()
    deadline = time.monotonic() + 5
    while n1.readyz() != 503 and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    assert n1.readyz() == 503
    await alice.send({"type": "hand.raise", "id": "h", "session": "room"})
    # The join was answered from its record: a reply the kill cut off afterwards does
    # not answer it again (docs/cluster.md, "An append's reply is lost").
    err = await alice.recv_type("error")
    assert err.get("re") == "h" and err["code"] == "unavailable", err
    # Redis comes back empty: the nodes recover without restart and reset their state.
    cluster.redis.start()
    n1.wait_ready(15)
    n2.wait_ready(15)
    assert await alice.expect_close(10) == 1012
    fresh = await dev(n2, "alice")
    assert (await join(fresh, "room"))["seq"] == 1


async def test_a_command_in_flight_when_redis_hangs_is_answered(cluster):
    """Redis stops answering with an append in flight: the reply never comes, the
    connection is declared silent after the reply limit, and the command's fate waits
    for a re-read that cannot happen. It is answered `unavailable` once the undecided
    limit passes (docs/cluster.md, "An append's reply is lost"), not never."""
    n1, _, _ = nodes(cluster)
    alice = await dev(n1, "alice")
    await join(alice, "room")
    cluster.redis.proc.send_signal(signal.SIGSTOP)
    try:
        started = time.monotonic()
        await alice.send({"type": "hand.raise", "id": "h", "session": "room"})
        err = await alice.recv_type("error", timeout=30)
        waited = time.monotonic() - started
        assert err.get("re") == "h" and err["code"] == "unavailable", err
        # Not before the reply limit plus the undecided limit (10 s).
        assert waited >= 10, waited
    finally:
        cluster.redis.proc.send_signal(signal.SIGCONT)
    n1.wait_ready(20)


async def test_flushed_redis_resets_sessions(cluster):
    n1, n2, _ = nodes(cluster)
    alice = await RawClient.connect(n1.port)
    welcome = await alice.hello_dev("alice")
    await alice.send({"type": "session.join", "session": "room"})
    joined = await alice.recv_type("session.joined")
    assert cluster.redis.command("FLUSHALL") == "+OK"
    with pytest.raises(Closed) as closed:
        while True:
            await alice.recv(timeout=10)
    assert closed.value.code == 1012
    n1.wait_ready(15)
    back = await RawClient.connect(n1.port)
    w = await back.hello_dev("alice", resume={"token": welcome["resumeToken"], "sessions": {"room": joined["seq"]}})
    assert w["resumed"] is False
    await back.send({"type": "session.join", "session": "room"})
    again = await back.recv_type("session.joined")
    assert again["seq"] == 1


async def test_password_db_url_and_cluster_metrics(tmp_path):
    c = Cluster(tmp_path, password="pa ss")
    try:
        n1, n2 = (Node(tmp_path, c.redis.url + "/2", f"n{i}", FLAGS) for i in (1, 2))
        c.nodes += [n1, n2]
        a, b = await dev(n1, "alice"), await dev(n2, "bob")
        await join(a, "room")
        await join(b, "room")
        assert (await a.recv_type("participant.joined"))["participant"]["uid"] == "bob"
        with urllib.request.urlopen(n1.http + "/metrics", timeout=5) as r:
            text = r.read().decode()
        assert "relay_cluster_ready 1" in text
        assert "relay_cluster_live_nodes 2" in text
        # The state is in database 2, not in the default one.
        assert c.redis.command("EXISTS", "relay:{relay}:generation") == ":0"
    finally:
        c.stop()


async def test_node_started_while_redis_is_down_listens_and_recovers(tmp_path):
    """A node accepts once it has joined the cluster; with Redis down it still
    comes up (health 200, ready 503) and joins when Redis does (§12)."""
    c = Cluster(tmp_path)
    try:
        c.redis.kill()
        n = Node(tmp_path, c.redis.url, "late", FLAGS, wait=False)
        c.nodes.append(n)
        deadline = time.monotonic() + 10
        while n.healthz() != 200:
            assert time.monotonic() < deadline, "a node without Redis must still answer /healthz"
            await asyncio.sleep(0.05)
        assert n.readyz() == 503
        c.redis.start()
        n.wait_ready(15)
        a = await dev(n, "alice")
        assert (await join(a, "room"))["seq"] == 1
    finally:
        c.stop()
