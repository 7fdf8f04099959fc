"""A damaged or foreign data dir never crashes the relay or lies (contract §12a): a
torn last record is cut off, a flipped byte in a record or a snapshot is found and
reported (fallback to what is intact), another version's dir and a second relay on
the same dir are refused with exit 3, `--data-dir` with `--redis` with exit 64."""
from __future__ import annotations

import json
import struct
import subprocess
import urllib.error
import urllib.request
import zlib
from pathlib import Path

from conftest import relay_binary
from durable import DurableRelay
from relayclient import Client

ADMIN = "durable-admin"
FLAGS = ["--admin-key", ADMIN, "--idle-timeout", "600000"]
HEADER = 52


def session_info(relay, session: str):
    req = urllib.request.Request(f"{relay.http}/v1/sessions/{session}")
    req.add_header("Authorization", "Bearer " + ADMIN)
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, json.loads(r.read())
    except urllib.error.HTTPError as e:
        return e.code, None


async def join_sessions(relay, names: list[str]) -> Client:
    c = await Client.connect(relay.ws)
    await c.hello_dev("alice")
    for name in names:
        await c.send({"type": "session.join", "id": name, "session": name})
        assert (await c.recv_type("session.joined"))["session"] == name
    return c


def frames(path: Path) -> list[tuple[int, int]]:
    """(offset, length) of each frame after the header, each checked as the relay does."""
    data = path.read_bytes()
    out, at = [], HEADER
    while at + 8 <= len(data):
        length, crc = struct.unpack_from("<II", data, at)
        payload = data[at + 8: at + 8 + length]
        assert zlib.crc32(payload) == crc
        out.append((at, length))
        at += 8 + length
    assert at == len(data)
    return out


def segments(data_dir: Path) -> list[Path]:
    return sorted(data_dir.glob("log-*.log"))


def flip(path: Path, offset: int) -> None:
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x20
    path.write_bytes(bytes(data))


async def test_a_torn_last_record_is_cut_off_and_logged(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    await join_sessions(relay, ["a", "b"])
    relay.kill()
    last = segments(relay.data_dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as f:  # a crash mid-write: a frame's head and part of its payload
        f.write(struct.pack("<II", 400, 12345) + b"x" * 100)
    relay = DurableRelay(relay.data_dir, *FLAGS)
    assert "torn last record cut off" in relay.output()
    assert last.stat().st_size == size
    assert session_info(relay, "a")[0] == 200 and session_info(relay, "b")[0] == 200
    relay.terminate()
    # The cut file reads cleanly the next time.
    relay = DurableRelay(relay.data_dir, *FLAGS)
    assert "torn last record" not in relay.output() and "damaged record" not in relay.output()
    relay.terminate()


async def test_a_flipped_byte_in_a_record_stops_the_replay_there_with_an_error(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    await join_sessions(relay, ["s1", "s2", "s3", "s4"])
    relay.kill()
    seg = segments(relay.data_dir)[-1]
    # Records: this process's join, the socket's open, hello, join s1 … s4 (one input each).
    offset, length = frames(seg)[5]
    flip(seg, offset + 8 + length - 3)
    relay = DurableRelay(relay.data_dir, *FLAGS)
    out = relay.output()
    assert "damaged record" in out, out
    assert [session_info(relay, s)[0] for s in ("s1", "s2", "s3", "s4")] == [200, 200, 404, 404]
    assert Path(str(seg) + ".damaged").exists()
    relay.terminate()


async def test_a_flipped_byte_in_the_newest_snapshot_falls_back_to_the_previous(tmp_path):
    flags = [*FLAGS, "--snapshot-records", "4"]
    relay = DurableRelay(tmp_path / "data", *flags)
    names = [f"s{i}" for i in range(12)]
    await join_sessions(relay, names)
    relay.terminate()  # the drain: alice is lost, her sessions stay
    snaps = sorted(relay.data_dir.glob("snapshot-*.snap"))
    assert len(snaps) == 2, snaps  # the newest and the fallback
    flip(snaps[-1], snaps[-1].stat().st_size - 5)
    relay = DurableRelay(relay.data_dir, *flags)
    out = relay.output()
    assert "file set aside" in out and snaps[-1].name in out, out
    assert all(session_info(relay, s)[0] == 200 for s in names)
    relay.terminate()


async def test_a_single_damaged_snapshot_falls_back_to_the_whole_log(tmp_path):
    flags = [*FLAGS, "--snapshot-records", "6"]
    relay = DurableRelay(tmp_path / "data", *flags)
    await join_sessions(relay, ["a", "b", "c"])
    relay.wait_snapshots(1)
    relay.kill()
    snaps = sorted(relay.data_dir.glob("snapshot-*.snap"))
    assert len(snaps) == 1, snaps
    flip(snaps[0], HEADER + 20)
    relay = DurableRelay(relay.data_dir, *flags)
    assert "no snapshot reads back" in relay.output()
    assert all(session_info(relay, s)[0] == 200 for s in ("a", "b", "c"))
    relay.terminate()


def test_a_data_dir_of_another_version_is_refused(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS)
    relay.terminate()
    other = DurableRelay(relay.data_dir, *FLAGS, env={"RELAY_TEST_RULES_VERSION": "4242"}, wait=False)
    assert other.wait_exit() == 3
    out = other.output()
    assert "was written by" in out and "rules 4242" in out, out
    # Refused, not touched: this version still reads it.
    DurableRelay(relay.data_dir, *FLAGS).terminate()


def test_a_second_relay_on_the_same_dir_is_refused(tmp_path):
    first = DurableRelay(tmp_path / "data", *FLAGS)
    second = DurableRelay(first.data_dir, *FLAGS, wait=False)
    assert second.wait_exit() == 3
    assert "in use by another relay" in second.output()
    assert first.status("/readyz") == 200
    first.terminate()


def test_data_dir_with_redis_is_a_usage_error(tmp_path):
    done = subprocess.run(
        [relay_binary(), "serve", "--data-dir", str(tmp_path / "d"), "--redis", "redis://127.0.0.1:1"],
        capture_output=True, text=True, timeout=20)
    assert done.returncode == 64
    assert "--data-dir is for a single node" in done.stderr + done.stdout
