"""Cluster fixtures (contract §12): a private redis-server and relay nodes sharing it.

Each Redis is started on a free loopback port in a temp dir and stopped by PID;
nodes log to files in the same dir (read on failure), so a chatty node never blocks
on a full pipe.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

import redisutil

from conftest import free_port, relay_binary

START_TIMEOUT_S = 20.0


def _wait(predicate, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.05)  # polling a process's port or endpoint: there is no event to await
    raise TimeoutError(f"{what} not within {timeout}s")


def _terminate(proc: subprocess.Popen | None) -> None:
    """SIGTERM, then SIGKILL if it is still running after 5 s (a server we started)."""
    if proc and proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


class Redis:
    """A private redis-server (no persistence) on 127.0.0.1:<port>."""

    def __init__(self, workdir: Path, password: str | None = None, name: str = "redis",
                 args: list[str] | None = None):
        self.password = password
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server not installed: run scripts/install-deps.sh --test")
        self.exe = exe
        self.dir = workdir / name
        self.dir.mkdir(exist_ok=True)
        self.port = free_port()
        self.args = list(args or [])  # extra flags (replication), kept across restarts
        self.proc: subprocess.Popen | None = None
        self.start()

    @property
    def url(self) -> str:
        auth = f":{self.password}@" if self.password else ""
        return f"redis://{auth}127.0.0.1:{self.port}"

    def start(self) -> None:
        log = open(self.dir / "redis.log", "ab")
        self.proc = subprocess.Popen(
            [self.exe, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", str(self.dir), *(["--requirepass", self.password] if self.password else []), *self.args],
            stdout=log, stderr=subprocess.STDOUT)
        try:
            _wait(self._answers, START_TIMEOUT_S, "redis")
        except BaseException:
            self.kill()  # never leave a server behind when the fixture fails
            raise

    def _answers(self) -> bool:
        try:
            return self.command("PING") == "+PONG"
        except OSError:
            return False

    def command(self, *args: str) -> str:
        """One command over a fresh socket (after AUTH); the first line of its reply."""
        with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
            commands = [("AUTH", self.password), args] if self.password else [args]  # pipelined
            s.sendall("".join(f"*{len(c)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in c)
                              for c in commands).encode())
            data = b""
            want = 2 if self.password else 1
            while data.count(b"\r\n") < want:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
            return data.split(b"\r\n")[want - 1].decode()

    def pipeline(self, commands: list[list[bytes]]) -> list[bytes]:
        """Many binary-safe commands on one socket; the first line of each reply."""
        return redisutil.pipeline(self.port, commands, self.password, timeout=30)

    def kill(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=5)

    def stop(self) -> None:
        _terminate(self.proc)


class Node:
    """A `relay serve --redis …` process."""

    def __init__(self, workdir: Path, redis_url: str, name: str, args: list[str], port: int | None = None,
                 wait: bool = True, env: dict | None = None, prefix: list[str] | None = None):
        self.name = name
        self.port = port or free_port()
        self.log_path = workdir / f"{name}.log"
        self.args = [*(prefix or []), relay_binary(), "serve", "--listen", f"127.0.0.1:{self.port}",
                     "--redis", redis_url, "--node-id", name, *args]
        env = {**os.environ, **(env or {})}
        env.pop("RELAY_SECRET", None)
        env.pop("RELAY_ADMIN_KEY", None)
        self.log = open(self.log_path, "ab")
        # A wrapper (`faketime`) runs the relay as its child: the node is then its own
        # process group, and signals go to the whole group, so no relay outlives its test.
        self.group = bool(prefix)
        self.proc = subprocess.Popen(self.args, stdout=self.log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=self.group)
        if wait:
            try:
                self.wait_ready()
            except BaseException:
                self.kill()  # a node that never became ready is not left running
                self.log.close()
                raise

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def ws(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def ready(self) -> bool:
        if self.proc.poll() is not None:
            raise RuntimeError(f"node {self.name} exited ({self.proc.returncode}):\n{self.output()}")
        try:
            with urllib.request.urlopen(self.http + "/readyz", timeout=1) as r:
                return r.status == 200
        except (OSError, urllib.error.HTTPError):
            return False

    def wait_ready(self, timeout: float = START_TIMEOUT_S) -> None:
        try:
            _wait(self.ready, timeout, f"node {self.name} ready")
        except TimeoutError:
            raise TimeoutError(f"node {self.name} not ready:\n{self.output()}")

    def healthz(self) -> int:
        try:
            with urllib.request.urlopen(self.http + "/healthz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code
        except OSError:
            return 0

    def readyz(self) -> int:
        try:
            with urllib.request.urlopen(self.http + "/readyz", timeout=2) as r:
                return r.status
        except urllib.error.HTTPError as e:
            return e.code

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def exit_code(self, timeout: float = START_TIMEOUT_S) -> int:
        """Waits for the process to end by itself; its exit status."""
        return self.proc.wait(timeout=timeout)

    def metric(self, name: str) -> float:
        """One unlabelled series of `/metrics`."""
        with urllib.request.urlopen(self.http + "/metrics", timeout=2) as r:
            for line in r.read().decode().splitlines():
                if line.startswith(name + " "):
                    return float(line.split()[1])
        raise KeyError(name)

    def signal(self, sig: int) -> None:
        if self.group:
            try:
                os.killpg(self.proc.pid, sig)  # our own group: the wrapper and its relay
            except ProcessLookupError:
                pass
        elif self.proc.poll() is None:
            self.proc.send_signal(sig)

    def kill(self) -> None:
        self.signal(signal.SIGKILL)
        self.proc.wait(timeout=5)

    def stop(self, timeout: float = 15.0) -> int:
        if self.proc.poll() is None or self.group:
            self.signal(signal.SIGCONT)
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.signal(signal.SIGKILL)
                self.proc.wait(timeout=5)
        self.log.close()
        return self.proc.returncode


class Cluster:
    def __init__(self, workdir: Path, password: str | None = None):
        self.dir = workdir
        self.redis = Redis(workdir, password)
        self.nodes: list[Node] = []

    def node(self, *args: str, name: str | None = None, port: int | None = None, wait: bool = True,
             env: dict | None = None, prefix: list[str] | None = None) -> Node:
        n = Node(self.dir, self.redis.url, name or f"n{len(self.nodes) + 1}", list(args), port, wait, env, prefix)
        self.nodes.append(n)
        return n

    def stop(self) -> None:
        for n in self.nodes:
            n.stop()
        self.redis.stop()


@pytest.fixture
def cluster(tmp_path):
    c = Cluster(tmp_path)
    yield c
    c.stop()


# --- Redis Sentinel (docs/cluster.md, "Redis high availability") ---

MASTER_NAME = "relaymaster"
# Long enough that a promoted primary busy for a second on a loaded machine (its
# first full sync to the returning old one) is not failed over again at once: a
# second failover, to a server that lacks records, is a reset by design (a new
# generation), and the single-failover tests would then test that instead.
DOWN_AFTER_MS = 3000
# Replication tuned for a test: a full sync starts at once (no 5 s wait for more
# replicas), and replicas are pinged every second.
REPLICATION_FLAGS = ["--repl-diskless-sync-delay", "0", "--repl-ping-replica-period", "1"]


class Sentinel:
    """A private redis-sentinel on 127.0.0.1:<port> watching one primary."""

    def __init__(self, workdir: Path, name: str, primary_port: int):
        exe = shutil.which("redis-sentinel")
        if exe is None:
            raise RuntimeError("redis-sentinel not installed: run scripts/install-deps.sh --test")
        self.dir = workdir / name
        self.dir.mkdir(exist_ok=True)
        self.port = free_port()
        conf = self.dir / "sentinel.conf"  # sentinel rewrites it: its own file
        conf.write_text("\n".join([
            f"port {self.port}", "bind 127.0.0.1", f"dir {self.dir}",
            f"sentinel monitor {MASTER_NAME} 127.0.0.1 {primary_port} 2",
            f"sentinel down-after-milliseconds {MASTER_NAME} {DOWN_AFTER_MS}",
            f"sentinel failover-timeout {MASTER_NAME} 4000",
            f"sentinel parallel-syncs {MASTER_NAME} 1", ""]))
        log = open(self.dir / "sentinel.log", "ab")
        self.proc = subprocess.Popen([exe, str(conf)], stdout=log, stderr=subprocess.STDOUT)

    def pipeline(self, commands: list[list[bytes]]) -> list[bytes]:
        return redisutil.pipeline(self.port, commands, timeout=5)

    def master_info(self) -> dict[str, str]:
        """`SENTINEL MASTER` as a dict ({} when it does not answer)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=2) as s:
                s.sendall(redisutil.encode([b"SENTINEL", b"MASTER", MASTER_NAME.encode()]))
                data = b""
                s.settimeout(2)
                while True:  # a flat array of bulk strings; read until it parses whole
                    chunk = s.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                    parsed = _flat_array(data)
                    if parsed is not None:
                        return dict(zip(parsed[::2], parsed[1::2]))
        except OSError:
            pass
        return {}

    def primary_port(self) -> int | None:
        info = self.master_info()
        return int(info["port"]) if "port" in info else None

    def stop(self) -> None:
        _terminate(self.proc)


def _flat_array(data: bytes) -> list[str] | None:
    """A RESP array of bulk strings, or None while incomplete."""
    if not data.startswith(b"*") or b"\r\n" not in data:
        return None
    head, rest = data.split(b"\r\n", 1)
    count, out = int(head[1:]), []
    for _ in range(max(count, 0)):
        if b"\r\n" not in rest:
            return None
        line, rest = rest.split(b"\r\n", 1)
        n = int(line[1:])
        if len(rest) < n + 2:
            return None
        out.append(rest[:n].decode())
        rest = rest[n + 2:]
    return out


class RedisHA:
    """A primary, one replica and three sentinels, all on loopback ports."""

    def __init__(self, workdir: Path):
        self.dir = workdir
        self.servers = [Redis(workdir, name="redis-a", args=REPLICATION_FLAGS)]
        self.servers.append(Redis(workdir, name="redis-b", args=[
            *REPLICATION_FLAGS, "--replicaof", "127.0.0.1", str(self.servers[0].port)]))
        self.sentinels: list[Sentinel] = []
        try:
            self.sentinels = [Sentinel(workdir, f"sentinel-{i}", self.servers[0].port) for i in range(3)]
            # Sentinels find each other and the replica through the primary (hello
            # messages every 2 s): a failover needs them all known first.
            _wait(self._settled, 20, "sentinels settled")
        except BaseException:
            self.stop()
            raise

    def _settled(self) -> bool:
        for s in self.sentinels:
            info = s.master_info()
            if info.get("num-other-sentinels") != "2" or info.get("num-slaves") != "1":
                return False
        return self.replica_online(self.primary())

    @property
    def url(self) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        return f"redis+sentinel://{hosts}/{MASTER_NAME}"

    def primary(self) -> Redis:
        port = self.sentinels[0].primary_port()
        return next(r for r in self.servers if r.port == port)

    def replica(self) -> Redis:
        port = self.sentinels[0].primary_port()
        return next(r for r in self.servers if r.port != port)

    def named_by_all(self, port: int) -> bool:
        return all(s.primary_port() == port for s in self.sentinels)

    @staticmethod
    def replica_online(primary: Redis) -> bool:
        """The primary has a replica in sync (`INFO replication`: state=online)."""
        try:
            info = primary.pipeline([[b"INFO", b"replication"]])
        except OSError:
            return False
        return bool(info) and b"state=online" in info[0]

    @staticmethod
    def replica_caught_up(primary: Redis, replica: Redis) -> bool:
        """The replica has processed everything the primary wrote (its replication
        offset reached the primary's); a replica answers INFO only after the turn that
        applied those writes, its AOF flush included."""
        def offset(server: Redis, field: bytes) -> int | None:
            try:
                info = server.pipeline([[b"INFO", b"replication"]])
            except OSError:
                return None
            for line in info[0].split(b"\r\n") if info else []:
                if line.startswith(field + b":"):
                    return int(line.split(b":", 1)[1])
            return None
        want, got = offset(primary, b"master_repl_offset"), offset(replica, b"master_repl_offset")
        return want is not None and got is not None and got >= want

    def restart_as_replica(self, server: Redis, of: Redis) -> None:
        """A killed server back on its port as a replica of `of` (what an operator's
        supervisor does with the old primary once the sentinels promoted another)."""
        server.args = [*REPLICATION_FLAGS, "--replicaof", "127.0.0.1", str(of.port)]
        server.start()

    def stop(self) -> None:
        for s in self.sentinels:
            s.stop()
        for r in self.servers:
            r.stop()


@pytest.fixture
def redis_ha(tmp_path):
    ha = RedisHA(tmp_path)
    yield ha
    ha.stop()
