"""The project's containers, built and run here with podman (Debian's, rootful).

docker/Dockerfile's runtime stage is built around the relay binary compiled on
this machine with the Swift runtime linked in (`--static-swift-stdlib`): no
Swift image can be pulled here, and the same Dockerfile compiles in one
elsewhere. docker/Dockerfile.services gives Redis and HAProxy from Debian.
Then docker/docker-compose.host.yml, the published compose file's cluster on
the host's loopback (three nodes, Redis, HAProxy with docker/haproxy.cfg), is
started with podman-compose: /readyz answers 200 through HAProxy, each node's
image health check passes, one node gets SIGTERM and drains (§12), and its
clients resume on the others through HAProxy with no gap in `seq` (§8).
Everything the test made (containers, pods, volumes, images) is removed, on
failure too: it all lives in a private podman store (podman.py).

Figures (base image, build times, image size) go to
.build/containers/figures.json and the test's output.
"""
from __future__ import annotations

import asyncio
import json
import os
import secrets
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from pathlib import Path

import pytest

from conftest import ROOT, free_port
from podman import BASE_IMAGE, CACHE, Podman, ensure_base_tarball
from test_cluster_haproxy import HAProxy, Member, reconnect_through

pytestmark = [
    pytest.mark.skipif(shutil.which("podman") is None,
                       reason="podman not installed: scripts/install-deps.sh --test installs it"),
    # `make asan` runs this directory with a sanitized RELAY_BIN; the image carries the
    # release binary instead, so such a run would only repeat `make test`'s.
    pytest.mark.skipif(bool(os.environ.get("RELAY_SANITIZER")), reason="the image holds the release binary"),
    # Builds (a release binary, two images) on a loaded 2-core machine.
    pytest.mark.timeout(2400),
]

RUN_ID = f"{os.getpid()}-{secrets.token_hex(3)}"
PROJECT = f"relaytest{RUN_ID.replace('-', '')}"
RELAY_IMAGE = f"localhost/relay-test:{RUN_ID}"
SERVICES_IMAGE = f"localhost/relay-test-services:{RUN_ID}"
RELEASE_FLAGS = ["-c", "release", "--static-swift-stdlib", "-Xswiftc", "-enforce-exclusivity=unchecked"]
READY_WITHIN_S = 60.0
# Debian's minbase without documentation, libuv, OpenSSL and the stripped relay; a copied
# Swift runtime or toolchain would not fit (figures: Benchmarks/results/containers.md).
MAX_IMAGE_BYTES = 120 * 1024 * 1024
FIGURES: dict[str, object] = {}


def static_relay_binary() -> Path:
    """RELAY_IMAGE_BIN, else the release binary, built here as `make release`
    builds it plus --static-swift-stdlib."""
    given = os.environ.get("RELAY_IMAGE_BIN")
    if given:
        return Path(given)
    swift = shutil.which("swift") or "/opt/swift/usr/bin/swift"
    subprocess.run(["nice", "-n", "10", swift, "build", *RELEASE_FLAGS, "--product", "relay"], cwd=ROOT,
                   check=True, timeout=2400)
    bin_dir = subprocess.run([swift, "build", *RELEASE_FLAGS, "--show-bin-path"], cwd=ROOT, check=True,
                             stdout=subprocess.PIPE, text=True, timeout=300).stdout.strip()
    return Path(bin_dir) / "relay"


def figure(name: str, value) -> None:
    FIGURES[name] = value
    print(f"figure {name}: {value}")
    CACHE.mkdir(parents=True, exist_ok=True)
    (CACHE / "figures.json").write_text(json.dumps(FIGURES, indent=2) + "\n")


@dataclass
class Images:
    relay: str
    services: str


@pytest.fixture(scope="module")
def podman(tmp_path_factory):
    p = Podman(tmp_path_factory.mktemp("podman"))
    try:
        p.check_private()
        yield p
    finally:
        p.remove_everything()
        assert not p.workdir.exists(), f"private podman store left behind: {p.mounts()}"


@pytest.fixture(scope="module")
def images(podman, tmp_path_factory) -> Images:
    binary = static_relay_binary()
    linked = subprocess.run(["ldd", str(binary)], stdout=subprocess.PIPE, text=True).stdout
    assert "libswift" not in linked and "libFoundation" not in linked, f"Swift runtime linked dynamically:\n{linked}"

    tarball, debootstrap_s = ensure_base_tarball()
    figure("debootstrap_s (0: cached)", round(debootstrap_s, 1))
    started = time.monotonic()
    podman.run("import", str(tarball), BASE_IMAGE, timeout=600)
    figure("base_import_s", round(time.monotonic() - started, 1))

    context = tmp_path_factory.mktemp("relay-context")
    # Stripped, as the Dockerfile's build stage installs it.
    subprocess.run(["strip", "-o", str(context / "relay"), str(binary)], check=True, timeout=120)
    started = time.monotonic()
    podman.run("build", "--format", "docker", "--pull=never", "--network", "host",
               "--build-arg", "RELAY_BINARY=prebuilt", "--target", "runtime",
               "-f", str(ROOT / "docker" / "Dockerfile"), "-t", RELAY_IMAGE, str(context), timeout=1200)
    figure("relay_image_build_s", round(time.monotonic() - started, 1))
    started = time.monotonic()
    podman.run("build", "--format", "docker", "--pull=never", "--network", "host",
               "-f", str(ROOT / "docker" / "Dockerfile.services"), "-t", SERVICES_IMAGE, str(ROOT / "docker"),
               timeout=1200)
    figure("services_image_build_s", round(time.monotonic() - started, 1))
    return Images(relay=RELAY_IMAGE, services=SERVICES_IMAGE)


def test_relay_image_is_small_self_contained_and_not_root(podman, images):
    size = int(podman.out("image", "inspect", "--format", "{{.Size}}", images.relay))
    figure("relay_image_bytes", size)
    assert size < MAX_IMAGE_BYTES, f"image is {size / 2**20:.1f} MiB"
    config = json.loads(podman.out("image", "inspect", "--format", "{{json .Config}}", images.relay))
    assert config["User"] == "10001:10001", config
    assert "/var/lib/relay" in (config.get("Volumes") or {}), config
    # A single node keeps its state in the volume (PROTOCOL.md §12a).
    assert "RELAY_DATA_DIR=/var/lib/relay" in (config.get("Env") or []), config
    assert config["Entrypoint"] == ["relay", "serve"], config
    health = json.loads(podman.out("image", "inspect", "--format", "{{json .HealthCheck}}", images.relay))
    assert health and health["Test"] == ["CMD", "relay", "probe"], health

    # No Swift runtime copied in: the binary runs on Debian's libraries alone.
    found = podman.out("run", "--rm", "--no-healthcheck", "--user", "0", "--entrypoint", "/usr/bin/find",
                       images.relay, "/", "-xdev", "-name", "libswift*")
    assert found == "", found
    ids = podman.out("run", "--rm", "--no-healthcheck", "--entrypoint", "/usr/bin/id", images.relay)
    assert ids.startswith("uid=10001(relay) gid=10001(relay)"), ids
    token = podman.out("run", "--rm", "--no-healthcheck", "--entrypoint", "relay", images.relay,
                       "token", "--secret", "s", "--sub", "a")
    assert token.count(".") == 2, token
    # The health probe fails, with a reason, where nothing listens.
    refused = podman.run("run", "--rm", "--no-healthcheck", "--entrypoint", "relay", "-e", "RELAY_LISTEN=127.0.0.1:1",
                         images.relay, "probe", check=False)
    assert refused.returncode == 1 and "127.0.0.1:1/readyz" in refused.stdout, refused.stdout


class Compose:
    """docker/docker-compose.host.yml under a project name of this run."""

    # HAProxy's view of the nodes, from its stats page (`self.stats_port`).
    statuses = HAProxy.statuses

    def __init__(self, podman: Podman, images: Images):
        self.podman = podman
        self.ports = {name: free_port() for name in
                      ("REDIS_PORT", "NODE1_PORT", "NODE2_PORT", "NODE3_PORT", "HAPROXY_PORT", "HAPROXY_STATS_PORT")}
        self.env = dict(podman.env)
        self.env.pop("RELAY_SECRET", None)
        self.env.update({k: str(v) for k, v in self.ports.items()})
        self.env.update({"RELAY_IMAGE": images.relay, "SERVICES_IMAGE": images.services})
        self.ws = f"ws://127.0.0.1:{self.ports['HAPROXY_PORT']}"
        self.http = f"http://127.0.0.1:{self.ports['HAPROXY_PORT']}"
        self.stats_port = self.ports["HAPROXY_STATS_PORT"]

    def compose(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        exe = shutil.which("podman-compose")
        cmd = [exe] if exe else [sys.executable, "-m", "podman_compose"]
        cmd += ["-p", PROJECT, "-f", str(ROOT / "docker" / "docker-compose.host.yml"), *args]
        p = subprocess.run(cmd, env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"podman-compose {' '.join(args)} exited {p.returncode}:\n{p.stdout[-4000:]}")
        return p

    def container(self, service: str) -> str:
        names = self.podman.out("ps", "-a", "--filter", f"label=io.podman.compose.project={PROJECT}",
                                "--filter", f"label=com.docker.compose.service={service}", "--format", "{{.Names}}")
        assert names, f"no container for {service}"
        return names.splitlines()[0]

    def project_leftovers(self) -> dict[str, list[str]]:
        """Whatever of this project is still in the store."""
        return {kind: [n for n in self.podman.names(kind) if PROJECT in n] for kind in ("container", "pod", "volume")}

    def logs(self) -> str:
        return self.compose("logs", check=False, timeout=60).stdout[-6000:]


def readyz(base: str) -> int:
    try:
        with urllib.request.urlopen(base + "/readyz", timeout=2) as r:
            return r.status
    except urllib.error.HTTPError as e:
        return e.code
    except OSError:
        return 0


def wait_ready(base: str, what: str) -> None:
    deadline = time.monotonic() + READY_WITHIN_S
    while readyz(base) != 200:
        if time.monotonic() > deadline:
            raise TimeoutError(f"{what}: /readyz not 200 within {READY_WITHIN_S}s")
        time.sleep(0.2)  # polling a port: there is no event to await


@pytest.fixture
def cluster(podman, images):
    c = Compose(podman, images)
    started = time.monotonic()
    try:
        c.compose("up", "-d")
        for i in (1, 2, 3):
            wait_ready(f"http://127.0.0.1:{c.ports[f'NODE{i}_PORT']}", f"relay{i}")
        wait_ready(c.http, "haproxy")
        deadline = time.monotonic() + READY_WITHIN_S
        while sorted(c.statuses().values()) != ["UP"] * 3:
            assert time.monotonic() < deadline, f"haproxy does not see every node UP: {c.statuses()}"
            time.sleep(0.2)  # HAProxy's health checks run on their own clock: nothing to await
        figure("cluster_up_s", round(time.monotonic() - started, 1))
        yield c
    except BaseException:
        print(c.logs())
        raise
    finally:
        c.compose("down", "-v", "-t", "15", check=False, timeout=180)
        left = c.project_leftovers()
        assert left == {"container": [], "pod": [], "volume": []}, left


async def test_cluster_survives_sigterm_and_clients_resume(cluster):
    c = cluster
    assert readyz(c.http) == 200
    # The image's own health check (podman runs it only when asked: no systemd here).
    for service in ("relay1", "relay2", "relay3"):
        c.podman.run("healthcheck", "run", c.container(service))

    members = [Member(f"u{i}") for i in range(6)]
    for m in members:
        await m.connect(c.ws)
        await m.join()
    by_node = {n: [m for m in members if m.node == n] for n in ("n1", "n2", "n3")}
    assert all(len(v) == 2 for v in by_node.values()), [(m.uid, m.node) for m in members]
    for i, m in enumerate(members):
        await m.say(i)
    for m in members:
        await m.reach(12)  # six joins, six messages

    # relay2 (HAProxy's n2) is told to stop, as `podman stop` or a rolling update would.
    victim = c.container("relay2")
    dropped, stayed = by_node["n2"], by_node["n1"] + by_node["n3"]
    c.podman.run("kill", "--signal", "TERM", victim)
    for m in dropped:
        await asyncio.wait_for(m.closed.wait(), 10)
        assert m.close_code == 1001, (m.uid, m.close_code)  # going away: drained (§12)
    for m in stayed:
        await m.say(100)

    for m in dropped:
        welcome, took = await reconnect_through(c, m)
        print(f"{m.uid}: back on {m.node} after {took:.2f}s, resumed={welcome['resumed']}")
        assert m.node in ("n1", "n3"), (m.uid, m.node)
        assert welcome["resumed"] is True, welcome
        resumed = await m.next_of(("session.resumed", "session.joined"))
        assert resumed["type"] == "session.resumed" and resumed["recovered"] is True, resumed
    # One last message: its seq is the session's last, and every member, drained
    # or not, has had every seq up to it exactly once, in order (§8).
    last = members[0]
    await last.say(999)
    own = lambda e: e.get("type") == "message" and e.get("data") == {"from": last.uid, "n": 999}  # noqa: E731
    await last.wait_until(lambda: any(own(e) for e in last.messages), 10, "own last message")
    final = next(e["seq"] for e in last.messages if own(e))
    for m in members:
        await m.reach(final)
        m.assert_continuous(final)

    exit_code = c.podman.out("wait", victim, timeout=60)
    assert exit_code == "0", f"relay2 exited {exit_code} after SIGTERM"
    assert readyz(c.http) == 200
    for m in members:
        await m.client.close()
