"""HAProxy (Debian's /usr/sbin/haproxy) in front of a 3-node cluster, with
docker/haproxy.cfg used verbatim: its addresses come from the environment,
here loopback ports (§12; docs/cluster-deploy.md).

Clients connect through HAProxy (round-robin over the nodes), join one
session and exchange messages; one node is SIGKILLed. Its clients' sockets
end; they reconnect through HAProxy and resume (§8). What the contract
promises is checked per member: no gap and no duplicate in `seq` across the
reconnect, every `participant.lost` resolved, and HAProxy's health check
(GET /readyz) takes the dead node out within a bounded time, after which new
connections land only on the survivors.
"""
from __future__ import annotations

import asyncio
import csv
import io
import json
import os
import signal
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

import pytest
import websockets

from cluster import cluster  # noqa: F401  (fixture)
from conftest import ROOT, free_port
from relayclient import Client

HAPROXY = "/usr/sbin/haproxy"
CFG = ROOT / "docker" / "haproxy.cfg"
NODE_FLAGS = ["--node-timeout", "1500", "--grace", "10000",
              "--heartbeat-interval", "1000", "--heartbeat-timeout", "3000"]
GRACE_S = 10.0
START_TIMEOUT_S = 20.0
# haproxy.cfg checks every 1 s and needs 2 failures: a dead node is out within
# ~2-3 s; the bound leaves room for a loaded machine.
MARKED_DOWN_WITHIN_S = 10.0
RECONNECT_WITHIN_S = 8.0
SESSION = "ha-room"
SESSION_EVENTS = ("participant.", "hand.", "hands.cleared", "message")


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # polling a process's port or stats page: there is no event to await
    raise TimeoutError(f"{what} not within {timeout}s")


class HAProxy:
    """haproxy -f docker/haproxy.cfg -db (foreground), stopped by PID."""

    def __init__(self, workdir: Path, nodes):
        self.port = free_port()
        self.stats_port = free_port()
        env = dict(os.environ)
        env.update({
            "HAPROXY_BIND": f"127.0.0.1:{self.port}",
            "HAPROXY_STATS_BIND": f"127.0.0.1:{self.stats_port}",
            **{f"RELAY_NODE{i + 1}": f"127.0.0.1:{n.port}" for i, n in enumerate(nodes)},
        })
        self.log_path = workdir / "haproxy.log"
        self.log = open(self.log_path, "ab")
        self.proc = subprocess.Popen([HAPROXY, "-f", str(CFG), "-db"], env=env,
                                     stdout=self.log, stderr=subprocess.STDOUT)
        try:
            _wait(self._accepts, START_TIMEOUT_S, "haproxy accepting")
            _wait(lambda: all(s.startswith("UP") for s in self.statuses().values()),
                  START_TIMEOUT_S, "haproxy seeing every node UP")
        except TimeoutError as e:
            self.stop()
            raise TimeoutError(f"{e}\n{self.output()}")

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def _accepts(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"haproxy exited ({self.proc.returncode}):\n{self.output()}")
        try:
            socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
            return True
        except OSError:
            return False

    def statuses(self) -> dict[str, str]:
        """Server name → check status ("UP", "DOWN", "UP 1/2", ...) from the CSV stats."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.stats_port}/stats;csv", timeout=2) as r:
                text = r.read().decode()
        except OSError:
            return {}
        rows = csv.DictReader(io.StringIO(text.lstrip("# ")))
        return {r["svname"]: r["status"] for r in rows
                if r["pxname"] == "relay_nodes" and r["svname"] not in ("FRONTEND", "BACKEND")}

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.log.close()


@pytest.fixture
def haproxy_factory(tmp_path):
    started: list[HAProxy] = []

    def start(nodes) -> HAProxy:
        if not Path(HAPROXY).exists():
            pytest.skip("haproxy not installed: run scripts/install-deps.sh --test")
        h = HAProxy(tmp_path, nodes)
        started.append(h)
        return h

    yield start
    for h in started:
        h.stop()


class Member:
    """One user in the session through HAProxy. Every message of every
    connection it had is kept, so the `seq` history can be checked across
    reconnects."""

    def __init__(self, uid: str):
        self.uid = uid
        self.client: Client | None = None
        self.node = ""
        self.messages: list[dict] = []
        # Where the current connection's messages start in `messages`.
        self.mark = 0
        self.closed = asyncio.Event()
        self.close_code: int | None = None
        self.resume_token = ""
        self.changed = asyncio.Event()
        self.pump: asyncio.Task | None = None

    async def connect(self, base_ws: str, resume: dict | None = None) -> dict:
        self.client = await Client.connect(base_ws)
        self.node = self.client.ws.response.headers.get("X-Relay-Node", "")
        hello = {"type": "hello", "id": "hello", "dev": {"uid": self.uid, "name": self.uid.title()}}
        if resume:
            hello["resume"] = resume
        await self.client.send(hello)
        welcome = await self.client.recv_type("welcome")
        self.resume_token = welcome["resumeToken"]
        self.mark = len(self.messages)
        self.closed = asyncio.Event()
        self.close_code = None
        self.pump = asyncio.create_task(self._pump(self.client))
        return welcome

    async def _pump(self, client: Client) -> None:
        code = None
        try:
            async for raw in client.ws:
                self.messages.append(json.loads(raw))
                self.changed.set()
        except websockets.ConnectionClosed as e:
            code = e.rcvd.code if e.rcvd else 1006  # no close frame: 1006
        self.close_code = code if code is not None else client.ws.close_code
        self.closed.set()
        self.changed.set()

    async def wait_until(self, condition, timeout: float, what: str) -> None:
        deadline = asyncio.get_running_loop().time() + timeout
        while not condition():
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise TimeoutError(f"{self.uid}: no {what} within {timeout}s; got {self.types()[-12:]}")
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), left)
            except asyncio.TimeoutError:
                pass

    async def next_of(self, types: tuple[str, ...], timeout: float = 5) -> dict:
        """The first message of one of `types` on the current connection."""
        found: list[dict] = []

        def seen() -> bool:
            found[:] = [m for m in self.messages[self.mark:] if m.get("type") in types][:1]
            return bool(found)

        await self.wait_until(seen, timeout, "/".join(types))
        return found[0]

    def types(self) -> list[str]:
        return [m.get("type", "?") for m in self.messages]

    def history(self, upto: int | None = None) -> tuple[int, list[int]]:
        """Since the latest snapshot (`session.joined`) among the first `upto`
        messages: its seq, then every session event's seq in arrival order
        (replays and live alike)."""
        start, seqs = 0, []
        for m in self.messages[:upto]:
            t = m.get("type", "")
            if t == "session.joined" and m.get("session") == SESSION:
                start, seqs = m["seq"], []
            elif m.get("session") == SESSION and t.startswith(SESSION_EVENTS) and "seq" in m:
                seqs.append(m["seq"])
        return start, seqs

    @property
    def last_seq(self) -> int:
        start, seqs = self.history()
        return seqs[-1] if seqs else start

    async def join(self) -> dict:
        await self.client.send({"type": "session.join", "id": "join", "session": SESSION})
        return await self.next_of(("session.joined",))

    async def say(self, n: int) -> None:
        await self.client.send({"type": "message.send", "session": SESSION, "data": {"from": self.uid, "n": n}})

    async def reach(self, seq: int, timeout: float = 10) -> None:
        await self.wait_until(lambda: self.last_seq >= seq, timeout, f"seq {seq}")

    def assert_continuous(self, final: int) -> None:
        """§2/§8: after its snapshot, every seq exactly once, in order, up to the session's last."""
        start, seqs = self.history()
        expected = list(range(start + 1, final + 1))
        assert seqs == expected, f"{self.uid}: seqs {seqs} != {expected}"


async def reconnect_through(h: HAProxy, m: Member) -> tuple[dict, float]:
    """Reconnects with resume until HAProxy hands the upgrade to a live node;
    returns the welcome and how long it took."""
    started = time.monotonic()
    resume = {"token": m.resume_token, "sessions": {SESSION: m.last_seq}}
    last_error: Exception | None = None
    while time.monotonic() - started < RECONNECT_WITHIN_S:
        try:
            return await m.connect(h.ws, resume), time.monotonic() - started
        except (OSError, websockets.InvalidHandshake, websockets.ConnectionClosed, TimeoutError) as e:
            last_error = e  # a 503 from HAProxy before the node is marked down: try again
            await asyncio.sleep(0.2)
    raise AssertionError(f"{m.uid}: no reconnect through haproxy within {RECONNECT_WITHIN_S}s: {last_error!r}")


async def test_clients_fail_over_through_haproxy(cluster, haproxy_factory):
    nodes = [cluster.node(*NODE_FLAGS) for _ in range(3)]
    h = haproxy_factory(nodes)
    members = [Member(f"u{i}") for i in range(6)]
    try:
        for m in members:
            await m.connect(h.ws)
            await m.join()
        # Round-robin without stickiness: every node serves two of the six.
        by_node = {n.name: [m for m in members if m.node == n.name] for n in nodes}
        assert {k: len(v) for k, v in by_node.items()} == {"n1": 2, "n2": 2, "n3": 2}, \
            [(m.uid, m.node) for m in members]

        for i, m in enumerate(members):
            await m.say(i)
        seq = 6 + len(members)  # six joins, then one message each
        for m in members:
            await m.reach(seq)

        victim = nodes[0]
        dropped, stayed = by_node[victim.name], [m for m in members if m.node != victim.name]
        victim.kill()
        killed_at = time.monotonic()
        for m in dropped:
            await asyncio.wait_for(m.closed.wait(), 5)
            assert m.close_code in (1001, 1006, 1011, 1012), (m.uid, m.close_code)

        # Events while the dropped members are away: their resumes must replay them.
        for m in stayed:
            await m.say(100)

        async def come_back(m: Member) -> None:
            welcome, took = await reconnect_through(h, m)
            print(f"{m.uid}: back on {m.node} after {took:.2f}s ({time.monotonic() - killed_at:.2f}s after the kill), "
                  f"resumed={welcome['resumed']}")
            assert m.node and m.node != victim.name, (m.uid, m.node)
            if welcome["resumed"]:
                # §8: replay of every seq after ours, then session.resumed at the last one.
                resumed = await m.next_of(("session.resumed", "session.joined"))
                assert resumed["type"] == "session.resumed", resumed
                assert resumed["recovered"] is True, resumed
                start, before = m.history(upto=next(i for i, e in enumerate(m.messages) if e is resumed))
                assert resumed["seq"] == (before[-1] if before else start), (resumed, before)
            else:
                # Only after grace may the relay have forgotten the user (§5, §8).
                assert time.monotonic() - killed_at >= GRACE_S, (m.uid, welcome, took)
                await m.join()

        def saw(m: Member, type_: str, uid: str):
            return lambda: any(e.get("type") == type_ and e.get("uid") == uid for e in m.messages)

        # One comes back at once, before the cluster has declared the node dead.
        early, later = dropped
        await come_back(early)
        # The other waits until it has: peers then see it lost (§12: within
        # --node-timeout + 2 000 ms of the death), and its resume restores it.
        watcher = stayed[0]
        await watcher.wait_until(saw(watcher, "participant.lost", later.uid), 1.5 + 2 + 3,
                                 f"participant.lost for {later.uid}")
        await come_back(later)
        await watcher.wait_until(saw(watcher, "participant.restored", later.uid), 5,
                                 f"participant.restored for {later.uid}")

        async def say_marked(m: Member, n: int) -> int:
            """Sends a message and returns its seq, from the sender's own copy (§7a)."""
            await m.say(n)
            own = lambda e: e.get("type") == "message" and e.get("data") == {"from": m.uid, "n": n}  # noqa: E731
            await m.wait_until(lambda: any(own(e) for e in m.messages), 5, f"own message {n}")
            return next(e["seq"] for e in m.messages if own(e))

        # Traffic after the failover reaches everyone, survivors and resumed alike.
        for m in members:
            seq = await say_marked(m, 200)
        for m in members:
            await m.reach(seq)

        # HAProxy's health check took the dead node out, within a bound...
        await asyncio.to_thread(
            _wait, lambda: h.statuses().get(victim.name, "").startswith("DOWN"),
            MARKED_DOWN_WITHIN_S, f"haproxy marking {victim.name} DOWN")
        # ...so new connections go to the survivors only.
        late = [Member(f"late{i}") for i in range(4)]
        for m in late:
            await m.connect(h.ws)
            assert m.node in ("n2", "n3"), (m.uid, m.node)
            await m.join()
        seq = await say_marked(late[-1], 300)
        for m in members + late:
            await m.reach(seq)

        for m in members + late:
            m.assert_continuous(seq)
            # §5: every participant.lost is followed by exactly one restored or timed_out.
            pending: set[str] = set()
            for e in m.messages:
                t, who = e.get("type"), e.get("uid")
                if t == "participant.lost":
                    assert who not in pending, (m.uid, who, "lost twice")
                    pending.add(who)
                elif t in ("participant.restored", "participant.timed_out"):
                    assert who in pending, (m.uid, who, t)
                    pending.discard(who)
            assert not pending, (m.uid, "unresolved participant.lost", pending)
    except BaseException:
        print(h.output())
        for n in nodes[1:]:
            print(f"--- {n.name}:\n{n.output()}")
        raise
    finally:
        for m in members:
            if m.client is not None:
                await m.client.close()
            if m.pump is not None:
                m.pump.cancel()
