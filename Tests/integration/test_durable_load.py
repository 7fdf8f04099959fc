"""Durability under load (contract §12a): with `--fsync always` every action answered
`ok` is there after a SIGKILL in the middle of a burst; a full disk (a file-size limit
of this test's own relay process, `RLIMIT_FSIZE`) makes the relay unavailable —
`/readyz` 503, commands `unavailable` — and it recovers without a restart, losing
nothing it answered."""
from __future__ import annotations

import asyncio
import resource

from durable import DurableRelay, wait_for
from test_liveness import RawClient

FLAGS = ["--heartbeat-interval", "1000", "--heartbeat-timeout", "8000", "--grace", "30000",
         "--idle-timeout", "600000", "--message-rate", "1000000"]


async def member(relay, uid: str) -> tuple[RawClient, dict, dict]:
    c = await RawClient.connect(relay.port)
    welcome = await c.hello_dev(uid)
    await c.send({"type": "session.join", "id": "j", "session": "room"})
    joined = await c.recv_type("session.joined")
    return c, welcome, joined


async def replay(relay, uid: str, welcome: dict, seq: int) -> list[dict]:
    c = await RawClient.connect(relay.port)
    w = await c.hello_dev(uid, resume={"token": welcome["resumeToken"], "sessions": {"room": seq}})
    assert w["resumed"] is True, w
    events = []
    while True:
        m = await c.recv(timeout=10)
        if m["type"] == "session.resumed":
            assert m["recovered"] is True, m
            return events
        events.append(m)


async def sender(c: RawClient, uid: str, acked: list, count: int) -> None:
    """Sends `count` messages, pipelined 8 deep; records each (uid, n) answered ok."""
    window = 8
    sent = 0
    outstanding = 0
    while sent < count or outstanding:
        while sent < count and outstanding < window:
            await c.send({"type": "message.send", "id": f"{uid}-{sent}", "session": "room", "data": {"n": sent}})
            sent += 1
            outstanding += 1
        m = await c.recv(timeout=10)
        if m["type"] == "ok":
            acked.append((uid, int(m["re"].split("-")[1])))
            outstanding -= 1
        elif m["type"] == "error":
            outstanding -= 1


async def test_fsync_always_keeps_every_ok_through_a_sigkill_mid_burst(tmp_path):
    relay = DurableRelay(tmp_path / "data", *FLAGS, "--fsync", "always")
    observer, welcome, joined = await member(relay, "observer")
    senders = [await member(relay, f"u{i}") for i in range(4)]
    acked: list = []
    tasks = [asyncio.create_task(sender(c, f"u{i}", acked, 10_000)) for i, (c, _, _) in enumerate(senders)]
    await asyncio.wait_for(_until(lambda: len(acked) >= 300), 60)
    relay.kill()  # mid-burst: answers in flight, records being written
    await asyncio.gather(*tasks, return_exceptions=True)
    answered = set(acked)
    assert len(answered) >= 300
    relay = DurableRelay(relay.data_dir, *FLAGS, "--fsync", "always", "--replay-events", "100000")
    events = await replay(relay, "observer", welcome, joined["seq"])
    logged = {(e["from"], e["data"]["n"]) for e in events if e["type"] == "message"}
    missing = answered - logged
    assert not missing, sorted(missing)[:10]
    relay.terminate()


async def _until(predicate) -> None:
    while not predicate():
        await asyncio.sleep(0.01)  # the senders' tasks fill `acked`: there is no event to await here


def file_limit(size: int):
    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
    return apply


async def test_a_full_disk_makes_the_relay_unavailable_then_it_recovers(tmp_path):
    # Each data file may grow to 48 KiB: the log segment fills up after ~40 messages;
    # the snapshot the retry writes is small (replay bounded to 8 KiB), starts a new
    # segment, and the relay takes commands again.
    flags = [*FLAGS, "--replay-bytes", "8192", "--fsync", "always"]
    relay = DurableRelay(tmp_path / "data", *flags, preexec_fn=file_limit(48 << 10))
    writer, _, _ = await member(relay, "writer")
    other, _, _ = await member(relay, "other")
    observer, welcome, _ = await member(relay, "observer")
    seqs: dict[int, int] = {}
    saw_unavailable = saw_503 = False
    n = 0
    while n < 200 and not (saw_unavailable and saw_503):
        await writer.send({"type": "message.send", "id": f"w-{n}", "session": "room", "data": {"n": n, "pad": "x" * 900}})
        try:
            m = await writer.recv_type("ok", timeout=0.3)
            n += 1
            continue
        except (asyncio.TimeoutError, TimeoutError):
            pass
        # The answer is held: the disk refused the record. Meanwhile the relay is unavailable.
        saw_503 = relay.status("/readyz") == 503
        await other.send({"type": "message.send", "id": "o", "session": "room", "data": "refused"})
        answer = await other.recv_type("error", timeout=5)
        saw_unavailable = answer["code"] == "unavailable"
        assert "data dir" in answer.get("message", ""), answer  # not the cluster's wording
        assert (await writer.recv_type("ok", timeout=15))["re"] == f"w-{n}"  # answered once written
        n += 1
    assert saw_unavailable and saw_503, (n, relay.output())
    wait_for(lambda: relay.status("/readyz") == 200, 10, "recovery")
    for k in range(n, n + 3):
        await writer.send({"type": "message.send", "id": f"w-{k}", "session": "room", "data": {"n": k}})
        assert (await writer.recv_type("ok", timeout=10))["re"] == f"w-{k}"
    assert "data dir writable again" in relay.output()
    # Nothing answered is lost: the last messages, across a crash, are all there.
    events = []
    while len([e for e in events if e.get("type") == "message"]) < n + 3:
        events.append(await observer.recv(timeout=5))
    seqs = {e["data"]["n"]: e["seq"] for e in events if e.get("type") == "message" and e["from"] == "writer"}
    relay.kill()
    relay = DurableRelay(relay.data_dir, *flags)
    last = n + 2
    replayed = await replay(relay, "observer", welcome, seqs[last - 4])
    got = [e["data"]["n"] for e in replayed if e["type"] == "message" and e["from"] == "writer"]
    assert got == [last - 3, last - 2, last - 1, last], got
    relay.terminate()


async def test_everysec_a_failed_write_is_covered_by_a_snapshot_before_any_answer_leaves(tmp_path):
    # `--fsync everysec` sends answers without holding them for the turn's write; when
    # that write fails (the segment reaches the 48 KiB file limit) a snapshot of the
    # state is written at once, before the flush: every answer sent is on disk.
    flags = [*FLAGS, "--replay-bytes", "8192", "--fsync", "everysec"]
    relay = DurableRelay(tmp_path / "data", *flags, preexec_fn=file_limit(48 << 10))
    writer, _, _ = await member(relay, "writer")
    observer, welcome, _ = await member(relay, "observer")
    seqs: dict[int, int] = {}
    total = 120  # ~110 KiB of records: the limit is reached more than once
    for n in range(total):
        await writer.send({"type": "message.send", "id": f"w-{n}", "session": "room", "data": {"n": n, "pad": "x" * 900}})
        assert (await writer.recv_type("ok", timeout=10))["re"] == f"w-{n}"
    while len(seqs) < total:
        e = await observer.recv(timeout=5)
        if e.get("type") == "message":
            seqs[e["data"]["n"]] = e["seq"]
    output = relay.output()
    assert "data dir write failed" in output and "data dir writable again" in output, output
    relay.kill()
    relay = DurableRelay(relay.data_dir, *flags)
    last = total - 1
    replayed = await replay(relay, "observer", welcome, seqs[last - 4])
    got = [e["data"]["n"] for e in replayed if e["type"] == "message" and e["from"] == "writer"]
    assert got == [last - 3, last - 2, last - 1, last], got
    relay.terminate()
