"""Podman for the container tests (test_containers.py), on a machine whose
settings the tests must not change: every piece of podman configuration is a
file in the test's own directory, named by environment variables
(CONTAINERS_CONF, CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF), so the
images, containers and volumes live in a private store that is deleted at the
end. The settings are those that work here: `runc` (crun cannot raise
RLIMIT_NOFILE here and does not run on hybrid cgroups), cgroupfs (no systemd),
a file events log, no registries to pull from, and a default open-file limit
no higher than this process's hard limit (podman's own default is above it, and
any --ulimit flag replaces the defaults).

Images cannot be pulled: the base image, `debian:bookworm-slim`, is made by
debootstrap (`--variant=minbase`) from the Debian mirror this machine's apt
uses, cached as a tarball under .build/containers/ and imported under that
name, so docker/Dockerfile's `FROM debian:bookworm-slim` finds it locally.
"""
from __future__ import annotations

import json
import os
import re
import resource
import shutil
import subprocess
import time
from pathlib import Path

from conftest import ROOT

CACHE = ROOT / ".build" / "containers"
BASE_TARBALL = CACHE / "debian-bookworm-minbase.tar"
BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
DEFAULT_MIRROR = "http://deb.debian.org/debian"


def debian_mirror() -> str:
    """The first `deb` URI of the machine's apt sources for the main archive."""
    sources = Path("/etc/apt/sources.list.d")
    texts = [p.read_text(errors="replace") for p in sorted(sources.glob("*.sources"))] if sources.is_dir() else []
    for text in texts:
        for uri in re.findall(r"^URIs:\s*(\S+)", text, re.M):
            if "security" not in uri:
                return uri
    legacy = Path("/etc/apt/sources.list")
    if legacy.exists():
        for line in legacy.read_text(errors="replace").splitlines():
            parts = line.split()
            if len(parts) >= 3 and parts[0] == "deb" and "security" not in parts[1] and not parts[1].startswith("["):
                return parts[1]
    return DEFAULT_MIRROR


def ensure_base_tarball() -> tuple[Path, float]:
    """The debootstrapped rootfs as a tarball, made once and reused (seconds spent)."""
    if BASE_TARBALL.exists():
        return BASE_TARBALL, 0.0
    started = time.monotonic()
    CACHE.mkdir(parents=True, exist_ok=True)
    rootfs = CACHE / f"rootfs.{os.getpid()}"
    partial = BASE_TARBALL.with_suffix(f".{os.getpid()}.part")
    try:
        subprocess.run(["nice", "-n", "10", "debootstrap", "--variant=minbase", "bookworm", str(rootfs), debian_mirror()],
                       check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=1200)
        slim(rootfs)
        # The kernel's file systems are left out: the engine mounts its own.
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "--exclude=./dev/*", "--exclude=./proc/*",
                        "--exclude=./sys/*", "-cf", str(partial), "."], check=True, timeout=600)
        partial.rename(BASE_TARBALL)
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)
        partial.unlink(missing_ok=True)
    return BASE_TARBALL, time.monotonic() - started


# What makes Debian's image "slim": no documentation, manual pages or translations,
# now or from packages installed later (dpkg's path filters).
SLIM_DPKG_FILTERS = """path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
"""


def slim(rootfs: Path) -> None:
    """Removes what a container image leaves out: downloaded packages, apt lists,
    and what SLIM_DPKG_FILTERS keeps out from now on."""
    for top in ("var/cache/apt/archives", "var/lib/apt/lists", "usr/share/man", "usr/share/info",
                "usr/share/locale", "usr/share/doc"):
        for p in sorted((rootfs / top).rglob("*"), reverse=True):
            is_dir = p.is_dir() and not p.is_symlink()
            if p.name in ("copyright", "locale.alias", "lock", "partial") or (is_dir and any(p.iterdir())):
                continue
            p.rmdir() if is_dir else p.unlink()
    (rootfs / "etc/dpkg/dpkg.cfg.d/slim").write_text(SLIM_DPKG_FILTERS)


class Podman:
    """`podman` with a private store and configuration under `workdir`."""

    def __init__(self, workdir: Path):
        self.workdir = workdir
        self.graphroot = workdir / "storage"
        self.runroot = workdir / "run"
        self.tmpdir = workdir / "libpod-tmp"
        for d in (self.graphroot, self.runroot, self.tmpdir):
            d.mkdir(parents=True, exist_ok=True)
        (workdir / "storage.conf").write_text(
            f'[storage]\ndriver = "overlay"\ngraphroot = "{self.graphroot}"\nrunroot = "{self.runroot}"\n')
        # Podman's own defaults raise RLIMIT_NOFILE and RLIMIT_NPROC above the hard
        # limits that conmon (and so runc) has here, and runc lacks CAP_SYS_RESOURCE to
        # raise them: open files default to the limit we have, processes to a few
        # thousand (conmon's limit here is lower than this process's; every service
        # of the tests runs a handful of threads).
        nofile = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        nproc = resource.getrlimit(resource.RLIMIT_NPROC)[1]
        nproc = 4096 if nproc == resource.RLIM_INFINITY else min(nproc, 4096)
        limits = f'"nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"'
        (workdir / "containers.conf").write_text(
            "[containers]\n"
            'netns = "host"\n'
            f"default_ulimits = [{limits}]\n"
            'log_driver = "k8s-file"\n'
            "[engine]\n"
            'runtime = "runc"\n'
            'cgroup_manager = "cgroupfs"\n'
            'events_logger = "file"\n'
            f'events_logfile_path = "{workdir / "events.log"}"\n'
            f'tmp_dir = "{self.tmpdir}"\n'
            "[network]\n"
            f'network_config_dir = "{workdir / "networks"}"\n')
        (workdir / "registries.conf").write_text("unqualified-search-registries = []\nshort-name-mode = \"permissive\"\n")
        self.env = dict(os.environ)
        self.env.update({
            "CONTAINERS_CONF": str(workdir / "containers.conf"),
            "CONTAINERS_STORAGE_CONF": str(workdir / "storage.conf"),
            "CONTAINERS_REGISTRIES_CONF": str(workdir / "registries.conf"),
        })

    def run(self, *args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        p = subprocess.run(["podman", *args], env=self.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, timeout=timeout)
        if check and p.returncode != 0:
            raise AssertionError(f"podman {' '.join(args)} exited {p.returncode}:\n{p.stdout[-4000:]}")
        return p

    def out(self, *args: str, timeout: float = 120) -> str:
        return self.run(*args, timeout=timeout).stdout.strip()

    def check_private(self) -> None:
        """Refuses to go on unless podman really uses the private store: cleanup
        removes whatever this store holds, never the machine's own."""
        info = json.loads(self.out("info", "--format", "json"))
        store = info["store"]
        assert Path(store["graphRoot"]) == self.graphroot, store["graphRoot"]
        assert info["host"]["ociRuntime"]["name"] == "runc", info["host"]["ociRuntime"]

    def names(self, kind: str) -> list[str]:
        """Every container, pod, volume or image (repository:tag) in the store."""
        if kind == "image":
            return [n for n in self.out("images", "--format", "{{.Repository}}:{{.Tag}}").splitlines() if n]
        listing = {"container": ["ps", "-a"], "pod": ["pod", "ps"], "volume": ["volume", "ls"]}[kind]
        return [n for n in self.out(*listing, "--format", "{{.Name}}").splitlines() if n]

    def remove_everything(self) -> None:
        """Empties the private store (containers, pods, volumes, images) and deletes it."""
        self.check_private()
        self.run("rm", "--all", "--force", "--volumes", "--time", "0", check=False)
        self.run("pod", "rm", "--all", "--force", check=False)
        self.run("volume", "rm", "--all", "--force", check=False)
        self.run("rmi", "--all", "--force", check=False)
        # The overlay driver bind-mounts its own directory; nothing else is mounted
        # once the containers are gone.
        for mount in reversed(self.mounts()):
            subprocess.run(["umount", "-l", mount], check=False)
        shutil.rmtree(self.workdir, ignore_errors=True)

    def mounts(self) -> list[str]:
        """Mount points inside the private store, outermost first."""
        root = str(self.workdir) + "/"
        with open("/proc/self/mountinfo") as f:
            points = [line.split()[4] for line in f]
        return [p for p in points if p.startswith(root)]
