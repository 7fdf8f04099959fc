"""Managed Redis (contract §12): `rediss://` (TLS, trusted through the system's roots
plus `--tls-ca-file`) and Redis 6 ACL users, as managed services require.

A private TLS-only redis-server (Debian's is built with TLS) whose `default` user is
disabled, so a node can only use it as the named ACL user:
- two nodes on `rediss://relay:PASSWORD@localhost:PORT` serve one session;
- a certificate the node does not trust, or a wrong password, keeps it unready and
  says why in its log;
- an unreadable `--tls-ca-file` is refused at start (exit 64).
"""
from __future__ import annotations

import shutil
import signal
import socket
import ssl
import subprocess
from pathlib import Path

import pytest

from cluster import START_TIMEOUT_S, Node, _terminate, _wait
from conftest import free_port, relay_binary
from relayclient import Client
from tlsutil import make_pair

USER, PASSWORD = "relay", "s3:cr@t"


class TLSRedis:
    """redis-server with TLS only (no plain port) and one ACL user."""

    def __init__(self, workdir: Path):
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not installed: run scripts/install-deps.sh --test")
        self.cert, self.key = make_pair(workdir / "redis-tls")
        self.port = free_port()
        self.log = open(workdir / "redis-tls.log", "ab")
        self.proc = subprocess.Popen(
            [exe, "--port", "0", "--tls-port", str(self.port), "--bind", "127.0.0.1", "--save", "",
             "--appendonly", "no", "--dir", str(workdir), "--tls-cert-file", str(self.cert),
             "--tls-key-file", str(self.key), "--tls-ca-cert-file", str(self.cert), "--tls-auth-clients", "no",
             "--user", "default", "off", "--user", USER, "on", f">{PASSWORD}", "~*", "&*", "+@all"],
            stdout=self.log, stderr=subprocess.STDOUT)
        try:
            _wait(self.answers, START_TIMEOUT_S, "TLS redis")
        except BaseException:
            self.stop()
            raise

    def answers(self) -> bool:
        ctx = ssl.create_default_context(cafile=str(self.cert))
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as raw:
                with ctx.wrap_socket(raw, server_hostname="localhost") as s:
                    s.sendall(f"AUTH {USER} {PASSWORD}\r\nPING\r\n".encode())
                    data = b""
                    while data.count(b"\r\n") < 2:
                        chunk = s.recv(1024)
                        if not chunk:
                            return False
                        data += chunk
                    return data == b"+OK\r\n+PONG\r\n"
        except OSError:
            return False

    def url(self, password: str = PASSWORD) -> str:
        return f"rediss://{USER}:{password}@localhost:{self.port}"

    def stop(self) -> None:
        _terminate(self.proc)
        self.log.close()


@pytest.fixture
def tls_redis(tmp_path):
    r = TLSRedis(tmp_path)
    yield r
    r.stop()


@pytest.fixture
def nodes():
    started: list[Node] = []
    yield started
    for n in started:
        n.stop()


async def test_rediss_with_an_acl_user_serves_a_session(tls_redis, nodes, tmp_path):
    for name in ("a", "b"):
        nodes.append(Node(tmp_path, tls_redis.url(), name, ["--tls-ca-file", str(tls_redis.cert)]))
    alice, bob = await Client.connect(nodes[0].ws), await Client.connect(nodes[1].ws)
    for c, uid in ((alice, "alice"), (bob, "bob")):
        await c.hello_dev(uid)
        await c.send({"type": "session.join", "id": "j", "session": "room"})
        await c.recv_type("session.joined")
    await alice.send({"type": "message.send", "id": "m", "session": "room", "data": "over TLS"})
    got = await bob.recv_type("message")
    assert got["data"] == "over TLS" and got["from"] == "alice"
    await alice.close()
    await bob.close()


@pytest.mark.parametrize("case", ["untrusted", "wrong-password"])
def test_a_redis_it_cannot_use_keeps_the_node_unready_and_says_why(tls_redis, nodes, tmp_path, case):
    if case == "untrusted":  # no --tls-ca-file: the self-signed certificate is not trusted
        node = Node(tmp_path, tls_redis.url(), "u", [], wait=False)
        why = "certificate verify failed"
    else:
        node = Node(tmp_path, tls_redis.url("wrong"), "w", ["--tls-ca-file", str(tls_redis.cert)], wait=False)
        why = "WRONGPASS"
    nodes.append(node)
    _wait(lambda: why in node.output(), START_TIMEOUT_S, f"the node logging {why}")
    _wait(lambda: node.healthz() == 200, START_TIMEOUT_S, "the node serving HTTP")
    assert node.readyz() == 503
    assert node.proc.poll() is None  # it keeps trying: a fixed Redis needs no restart


def test_an_unreadable_ca_file_is_refused_at_start(tls_redis, tmp_path):
    run = subprocess.run(
        [relay_binary(), "serve", "--listen", f"127.0.0.1:{free_port()}", "--redis", tls_redis.url(),
         "--tls-ca-file", str(tmp_path / "missing.pem")],
        capture_output=True, text=True, timeout=30)
    assert run.returncode == 64, run
    assert "--tls-ca-file" in run.stderr, run.stderr
