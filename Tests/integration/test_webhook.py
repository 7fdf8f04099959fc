"""Webhook (contract §11) against a local receiver: signed POSTs for call.offline and
the withdrawal call.cancelled, retries with backoff after 5xx, a bounded number of
attempts, and a receiver that never answers does not slow the relay's own traffic;
`https://` by host name with `--tls-ca-file`, connections reused, the name resolved
per connection, and settings that cannot work refused at start (exit 64)."""
from __future__ import annotations

import asyncio
import hashlib
import hmac
import json
import socket
import ssl
import subprocess
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import free_port, relay_binary
from relayclient import Client
from tlsutil import make_pair

SECRET = "hook-secret"


class Receiver:
    """A webhook receiver (HTTP/1.1, keep-alive) in a thread. `statuses` are answered
    in order (the last one repeats); `hang` holds every request without answering.
    `tls` = (cert, key) serves HTTPS; `host`/`port` choose the address (IPv6 for
    "::1"). `peers` lists each request's client address (its connection)."""

    def __init__(self, statuses=(200,), hang: bool = False, tls=None, host: str = "127.0.0.1", port: int = 0):
        self.statuses = list(statuses)
        self.hang = hang
        self.scheme = "https" if tls else "http"
        self.requests: list[tuple[dict, bytes, float]] = []
        self.peers: list[tuple] = []
        self.connections: list[socket.socket] = []
        self.release = threading.Event()
        self.arrived = threading.Condition()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                receiver.connections.append(self.connection)

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.arrived:
                    receiver.peers.append(self.client_address[:2])
                    receiver.requests.append((dict(self.headers), body, time.monotonic()))
                    status = receiver.statuses[min(len(receiver.requests), len(receiver.statuses)) - 1]
                    receiver.arrived.notify_all()
                if receiver.hang:
                    receiver.release.wait(30)
                    return
                self.send_response(status)
                self.send_header("Content-Length", "0")
                self.end_headers()

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            address_family = socket.AF_INET6 if ":" in host else socket.AF_INET

        self.server = Server((host, port), Handler)
        if tls:
            ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
            ctx.load_cert_chain(str(tls[0]), str(tls[1]))
            self.server.socket = ctx.wrap_socket(self.server.socket, server_side=True)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def port(self) -> int:
        return self.server.server_address[1]

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}/hooks/relay"

    def wait_for(self, count: int, timeout: float = 10.0) -> list[tuple[dict, bytes, float]]:
        deadline = time.monotonic() + timeout
        with self.arrived:
            while len(self.requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError(f"{len(self.requests)} of {count} webhook requests")
                self.arrived.wait(left)
            return list(self.requests)

    def close(self) -> None:
        self.release.set()
        self.server.shutdown()
        self.server.server_close()
        for c in self.connections:  # kept-alive connections end too: the receiver is gone
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


@pytest.fixture
def receiver_factory():
    made: list[Receiver] = []

    def make(**kw) -> Receiver:
        r = Receiver(**kw)
        made.append(r)
        return r

    yield make
    for r in made:
        r.close()


def hooked(relay_factory, receiver: Receiver, *flags: str, url: str | None = None):
    return relay_factory("--webhook-url", url or receiver.url, "--webhook-secret", SECRET, *flags)


def verify(headers: dict, body: bytes) -> None:
    expected = "sha256=" + hmac.new(SECRET.encode(), body, hashlib.sha256).hexdigest()
    assert hmac.compare_digest(headers["X-Relay-Signature"], expected)
    assert headers["Content-Type"] == "application/json"


def metric(relay, name: str) -> float:
    with urllib.request.urlopen(relay.http + "/metrics", timeout=5) as r:
        for line in r.read().decode().splitlines():
            if line.startswith(name + " ") or line.startswith(name + "{"):
                return float(line.rsplit(" ", 1)[1])
    return 0.0


async def wait_metric(relay, name: str, value: float, timeout: float = 5.0) -> float:
    """Polls /metrics until `name` reaches `value` (the response to the webhook is
    counted after the receiver answered, so there is no message to await)."""
    deadline = time.monotonic() + timeout
    while True:
        got = await asyncio.to_thread(metric, relay, name)
        if got == value or time.monotonic() > deadline:
            return got
        await asyncio.sleep(0.02)


async def dev(relay, uid: str) -> Client:
    c = await Client.connect(relay.ws)
    await c.hello_dev(uid)
    return c


async def call_offline(alice: Client, to: list[str]) -> str:
    await alice.send({"type": "call.initiate", "id": "i", "to": to, "callType": "video", "metadata": {"k": 1}})
    ok = await alice.recv_type("ok")
    return ok["callId"]


async def test_offline_callee_webhook_is_signed_and_withdrawn(relay_factory, receiver_factory):
    receiver = receiver_factory()
    relay = hooked(relay_factory, receiver)
    alice = await dev(relay, "alice")
    before = int(time.time() * 1000)
    call = await call_offline(alice, ["dave"])
    headers, body, _ = (await asyncio.to_thread(receiver.wait_for, 1))[0]
    verify(headers, body)
    assert headers["X-Relay-Event"] == "call.offline"
    event = json.loads(body)
    assert event["event"] == "call.offline" and event["callId"] == call and event["uid"] == "dave"
    assert event["from"] == {"uid": "alice", "name": "Alice"} and event["callType"] == "video"
    assert isinstance(event["sessionId"], str) and event["metadata"] == {"k": 1}
    assert before <= event["sentAt"] <= event["expiresAt"] - 40_000
    await alice.send({"type": "call.cancel", "id": "x", "callId": call})
    requests = await asyncio.to_thread(receiver.wait_for, 2)
    headers, body, _ = requests[1]
    verify(headers, body)
    assert headers["X-Relay-Event"] == "call.cancelled"
    assert json.loads(body)["reason"] == "cancelled" and json.loads(body)["uid"] == "dave"
    assert await wait_metric(relay, "relay_webhook_sent_total", 2) == 2


async def test_retried_after_500(relay_factory, receiver_factory):
    receiver = receiver_factory(statuses=(500, 503, 200))
    relay = hooked(relay_factory, receiver)
    alice = await dev(relay, "alice")
    await call_offline(alice, ["dave"])
    requests = await asyncio.to_thread(receiver.wait_for, 3)
    assert len({body for _, body, _ in requests}) == 1  # the same signed body each time
    for headers, body, _ in requests:
        verify(headers, body)
    assert requests[2][2] - requests[0][2] >= 0.2 + 0.4 - 0.05  # backoff grows: 200 ms, then 400 ms
    assert await wait_metric(relay, "relay_webhook_sent_total", 1) == 1
    assert metric(relay, "relay_webhook_retried_total") == 2


async def test_gives_up_after_the_bound(relay_factory, receiver_factory):
    receiver = receiver_factory(statuses=(500,))
    relay = hooked(relay_factory, receiver)
    alice = await dev(relay, "alice")
    await call_offline(alice, ["dave"])
    await asyncio.to_thread(receiver.wait_for, 4)
    await asyncio.sleep(3.0)  # longer than the next backoff would be: no 5th attempt
    assert len(receiver.requests) == 4
    assert metric(relay, "relay_webhook_failed_total") == 1
    assert metric(relay, "relay_webhook_retried_total") == 3


async def fanout_latencies(members: list[Client], rounds: int) -> list[float]:
    """Per round: time from hand.raise to the last member seeing hand.raised."""
    latencies = []
    for i in range(rounds):
        raiser = members[i % len(members)]
        start = time.monotonic()
        await raiser.send({"type": "hand.raise", "session": "room"})
        await asyncio.gather(*(m.recv_type("hand.raised") for m in members))
        latencies.append(time.monotonic() - start)
        await raiser.send({"type": "hand.lower", "session": "room"})
        await asyncio.gather(*(m.recv_type("hand.lowered") for m in members))
    return sorted(latencies)


async def test_stuck_webhook_does_not_slow_fanout(relay_factory, receiver_factory):
    receiver = receiver_factory(hang=True)
    relay = hooked(relay_factory, receiver)
    members = [await dev(relay, f"m{i}") for i in range(20)]
    for m in members:
        await m.send({"type": "session.join", "id": "j", "session": "room"})
        await m.recv_type("session.joined")
    for m in members:  # drain participant.joined events
        while True:
            try:
                await m.recv(timeout=0.05)
            except asyncio.TimeoutError:
                break
    caller = await dev(relay, "caller")
    for batch in range(3):  # 3 calls × 8 offline callees: far more than the delivery slots
        await call_offline(caller, [f"offline{batch}-{k}" for k in range(8)])
    stuck = await asyncio.to_thread(receiver.wait_for, 4)
    assert len(stuck) == 4  # every delivery slot is held by the silent receiver
    latencies = await fanout_latencies(members, rounds=15)
    median, worst = latencies[len(latencies) // 2], latencies[-1]
    print(f"fan-out to 20 members while the webhook hangs: median {median * 1000:.1f} ms, worst {worst * 1000:.1f} ms")
    # A client that waited on the receiver would stall for its 5 000 ms response
    # timeout; the bounds leave room for a loaded test machine.
    assert median < 0.15 and worst < 0.5, f"fan-out median {median * 1000:.0f} ms, worst {worst * 1000:.0f} ms"
    assert len(receiver.requests) == 4
    # The relay still answers its HTTP side too.
    with urllib.request.urlopen(relay.http + "/healthz", timeout=2) as r:
        assert r.status == 200


async def test_stuck_webhook_does_not_delay_shutdown(relay_factory, receiver_factory):
    receiver = receiver_factory(hang=True)
    relay = hooked(relay_factory, receiver)
    alice = await dev(relay, "alice")
    await call_offline(alice, ["dave", "erin"])
    await asyncio.to_thread(receiver.wait_for, 2)
    start = time.monotonic()
    relay.proc.terminate()
    assert await alice.expect_close() == 1001
    code = await asyncio.to_thread(relay.proc.wait, 10)
    assert code == 0 and time.monotonic() - start < 3.0


async def test_session_and_call_lifecycle_events(relay_factory, receiver_factory):
    receiver = receiver_factory()
    relay = hooked(relay_factory, receiver)
    alice, bob = await dev(relay, "alice"), await dev(relay, "bob")
    await alice.send({"type": "call.initiate", "id": "i", "to": ["bob"], "callType": "audio"})
    ok = await alice.recv_type("ok")
    await bob.recv_type("call.incoming")
    await bob.send({"type": "call.accept", "callId": ok["callId"]})
    await bob.recv_type("call.accepted")
    await bob.send({"type": "session.join", "session": ok["sessionId"]})
    await bob.recv_type("session.joined")
    await bob.send({"type": "call.end", "callId": ok["callId"]})
    await bob.recv_type("call.ended")
    await bob.send({"type": "session.leave", "session": ok["sessionId"]})
    requests = await asyncio.to_thread(receiver.wait_for, 4)
    events = [(h["X-Relay-Event"], json.loads(b)) for h, b, _ in requests]
    for headers, body, _ in requests:
        verify(headers, body)
    names = sorted(name for name, _ in events)
    assert names == ["call.accepted", "call.ended", "session.created", "session.ended"]
    for name, body in events:
        assert body["event"] == name and body["sessionId"] == ok["sessionId"]


async def test_https_by_host_name_with_ca_file_reuses_the_connection(relay_factory, receiver_factory, tmp_path):
    cert, key = make_pair(tmp_path / "hooks")
    receiver = receiver_factory(tls=(cert, key))
    url = f"https://localhost:{receiver.port}/hooks/relay"
    relay = hooked(relay_factory, receiver, "--tls-ca-file", str(cert), url=url)
    alice = await dev(relay, "alice")
    for i in range(4):
        await call_offline(alice, [f"dave{i}"])
        # One after the other (answered and counted before the next): nothing calls
        # for a second connection.
        assert await wait_metric(relay, "relay_webhook_sent_total", i + 1) == i + 1
    requests = receiver.requests
    for headers, body, _ in requests:
        verify(headers, body)
        assert headers["X-Relay-Event"] == "call.offline"
    assert len(requests) == 4
    assert len(set(receiver.peers)) == 1, f"events came over {len(set(receiver.peers))} connections"


async def test_untrusted_https_receiver_is_not_delivered(relay_factory, receiver_factory, tmp_path):
    cert, key = make_pair(tmp_path / "hooks")
    receiver = receiver_factory(tls=(cert, key))
    relay = hooked(relay_factory, receiver, url=f"https://localhost:{receiver.port}/hooks/relay")
    alice = await dev(relay, "alice")
    await call_offline(alice, ["dave"])
    assert await wait_metric(relay, "relay_webhook_retried_total", 1) == 1
    assert receiver.requests == []  # the TLS handshake failed: no request reached it


def ipv6_loopback() -> bool:
    try:
        with socket.socket(socket.AF_INET6) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


@pytest.mark.skipif(not ipv6_loopback(), reason="no IPv6 loopback")
async def test_host_name_is_resolved_per_connection(relay_factory, receiver_factory):
    """`localhost` names ::1 and 127.0.0.1. The relay starts before any receiver
    exists; the first answers on ::1 only, then it goes and another answers on
    127.0.0.1 only, same port: both get their event, so the name is resolved when
    connecting, not once at start."""
    with socket.socket(socket.AF_INET6) as s:
        s.bind(("::1", 0))
        port = s.getsockname()[1]
    url = f"http://localhost:{port}/hooks/relay"
    relay = relay_factory("--webhook-url", url, "--webhook-secret", SECRET)
    first = receiver_factory(host="::1", port=port)
    alice = await dev(relay, "alice")
    await call_offline(alice, ["dave"])
    (headers, body, _), = await asyncio.to_thread(first.wait_for, 1)
    verify(headers, body)
    assert first.peers[0][0] == "::1"
    first.close()
    second = receiver_factory(host="127.0.0.1", port=port)
    await call_offline(alice, ["erin"])
    (headers, body, _), = await asyncio.to_thread(second.wait_for, 1)
    verify(headers, body)
    assert json.loads(body)["uid"] == "erin" and second.peers[0][0] == "127.0.0.1"


@pytest.mark.parametrize("flags, says", [
    (["--webhook-url", "ftp://hooks.example.com/relay"], "--webhook-url"),
    (["--webhook-url", "hooks.example.com/relay"], "--webhook-url"),
    (["--webhook-url", "http://:8080/relay"], "--webhook-url"),
    (["--webhook-url", "https://hooks.example.com/relay", "--tls-ca-file", "/nonexistent/ca.pem"], "--tls-ca-file"),
])
def test_unusable_settings_refuse_to_start(flags, says):
    proc = subprocess.run([relay_binary(), "serve", "--listen", f"127.0.0.1:{free_port()}", *flags],
                          capture_output=True, text=True, timeout=20)
    assert proc.returncode == 64, proc.stdout + proc.stderr
    assert says in proc.stdout + proc.stderr


def test_ca_file_without_a_certificate_refuses_to_start(tmp_path):
    _, key = make_pair(tmp_path / "x")
    proc = subprocess.run(
        [relay_binary(), "serve", "--listen", f"127.0.0.1:{free_port()}", "--webhook-url", "https://localhost/h",
         "--tls-ca-file", str(key)], capture_output=True, text=True, timeout=20)
    assert proc.returncode == 64 and "no PEM certificate" in proc.stdout + proc.stderr
