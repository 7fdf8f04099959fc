"""`make bench-abuse`: the attack families of protocol/ §1, §3, §5.2, §7, §10.1 and §16
against a release relay on loopback, each bounded in time and stopping by itself.
Writes Benchmarks/results/abuse.md. Figures come from the relay's own /metrics
(loop turns, queued bytes), /proc (RSS) and what the attacked clients observed.

    python3 Benchmarks/abuse.py            (RELAY_BIN: default .build/release/relay)
"""
from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "Tests" / "integration"))
os.environ.setdefault("RELAY_BIN", str(ROOT / ".build" / "release" / "relay"))

import storm  # noqa: E402
from abuse_util import last_word, metric, metrics_text, rejoin, silent_member, wait_for_metric  # noqa: E402
from conftest import RelayProcess  # noqa: E402
from relayclient import Client, make_jwt  # noqa: E402
from test_abuse_slow_reader import SLOW_READ_BYTES_PER_S, Stream, hello_and_join, read_until_end  # noqa: E402
from wsraw import RawClient  # noqa: E402

rows: list[tuple[str, str, str, str]] = []

# What an attack run measured before these bounds (at its own scale, 2026-11-24).
BEFORE = {
    "slow": "no 4008: TCP reset and a truncated frame after ~23 s",
    "name": "accepted",
    "exp": "accepted as never expiring",
    "1e400": "forwarded as written (Infinity in JS/Python)",
    "churn": "927 of 950 readers closed 4008 (65 KB names)",
    "pile": "loop stalls up to 6.1 s (3 000 × twelve 1 000-member sessions)",
    "death": "15 354 participant.lost fan-outs stall the loop 3.6 s (18 000 members)",
    "canary": "up to 19 % refused",
    "ring": "target got 64 000 call.incoming",
    "storm": "f9704c9: see the storm section below",
}

# The big-room join storm (storm.py), sized for this machine: 18 × 999 members that read
# nothing hold about 1.5 GB of kernel socket memory, past the kernel's TCP memory
# pressure threshold (tcp_mem), which then slows every socket of every process on it.
STORM_SESSIONS = int(os.environ.get("STORM_SESSIONS", "6"))
STORM_MEMBERS = int(os.environ.get("STORM_MEMBERS", "999"))


def row(attack: str, measured: str, bound: str, before: str = "") -> None:
    rows.append((attack, before, measured, bound))
    print(f"{attack}: {measured}", flush=True)


def rss_mb(relay) -> float:
    for line in Path(f"/proc/{relay.proc.pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def turns_over(relay, le: str) -> int:
    text = metrics_text(relay)
    count = metric(relay, "relay_loop_turn_seconds_count", text)
    within = metric(relay, f'relay_loop_turn_seconds_bucket{{le="{le}"}}', text)
    return int(count - within)


class Turns:
    """Loop turns over 50/100/250 ms between `start` and `stop`."""

    def __init__(self, relay):
        self.relay = relay
        self.before = {le: turns_over(relay, le) for le in ("0.05", "0.1", "0.25")}

    def text(self) -> str:
        after = {le: turns_over(self.relay, le) - self.before[le] for le in self.before}
        return f"turns > 50 ms: {after['0.05']}, > 100 ms: {after['0.1']}, > 250 ms: {after['0.25']}"


def slow_reader() -> None:
    relay = RelayProcess(["--message-rate", "1000"])
    try:
        slow = RawClient(relay.port, rcvbuf=16384)
        hello_and_join(slow, "slow", "s")
        stream = Stream(relay, "s")
        started = time.monotonic()
        try:
            outcome, frames = read_until_end(slow, SLOW_READ_BYTES_PER_S, limit_s=120)
        finally:
            stream.close()
        took = time.monotonic() - started
        row("Reader at 80 KB/s in a 160 KB/s session (defaults: 1 MiB outbound, heartbeat 10 s/15 s)",
            f"ends with {outcome} after {took:.1f} s and {frames} whole frames",
            "close 4008, whole frame", BEFORE["slow"])
    finally:
        relay.stop()


async def identities() -> None:
    relay = RelayProcess([])
    secret_relay = RelayProcess(["--secret", "s"])
    try:
        c = await Client.connect(relay.ws)
        await c.send({"type": "hello", "id": "h", "dev": {"uid": "m", "name": "n" * 65_000}})
        reply = await c.recv()
        row("Dev hello with a 65 KB name", f"{reply['code']}, close {await c.expect_close()}", "bad_request, 4501",
            BEFORE["name"])
        c = await Client.connect(secret_relay.ws)
        await c.send({"type": "hello", "id": "h", "token": make_jwt("s", {"sub": "m", "exp": int(time.time()) + 60, "name": "n" * 48_000})})
        reply = await c.recv()
        row("Token with a 48 KB name claim", f"{reply['code']}, close {await c.expect_close()}", "bad_request, 4501",
            BEFORE["name"])
        c = await Client.connect(secret_relay.ws)
        await c.send({"type": "hello", "id": "h", "token": make_jwt("s", {"sub": "m", "exp": 1e30})})
        reply = await c.recv()
        row("Token with exp 1e30", f"{reply['code']}, close {await c.expect_close()}", "unauthorized, 4501", BEFORE["exp"])
        c = await Client.connect(relay.ws)
        await c.hello_dev("a")
        await c.send({"type": "session.join", "session": "s"})
        await c.recv_type("session.joined")
        await c.send('{"type":"message.send","id":"m","session":"s","data":1e400}')
        row("`data: 1e400`", (await c.recv_type("error"))["code"], "bad_request", BEFORE["1e400"])
    finally:
        relay.stop()
        secret_relay.stop()


async def churn() -> None:
    """50 churners, each within --join-rate, against a 450-member session of readers."""
    relay = RelayProcess(["--heartbeat-interval", "0"])
    readers, churners = [], []
    try:
        drains = []
        for i in range(450):
            c = await Client.connect(relay.ws)
            await c.hello_dev(f"r{i}", name="r" * 200)
            await c.send({"type": "session.join", "session": "big"})
            readers.append(c)
            drains.append(asyncio.create_task(drain(c)))
        await asyncio.sleep(10)  # the readers' own joins leave the session's window
        turns = Turns(relay)
        accepted = refused = 0

        async def one(i: int):
            nonlocal accepted, refused
            c = await Client.connect(relay.ws)
            churners.append(c)
            await c.hello_dev(f"c{i}", name="c" * 256)
            for k in range(10):
                await c.send({"type": "session.join", "id": f"j{k}", "session": "big"})
                while True:
                    m = await c.recv(timeout=30)
                    if m.get("re") == f"j{k}":
                        break
                if m["type"] == "error":
                    refused += 1
                    continue
                accepted += 1
                await c.send({"type": "session.leave", "id": f"l{k}", "session": "big"})
                while (await c.recv(timeout=30)).get("re") != f"l{k}":
                    pass

        await asyncio.gather(*(one(i) for i in range(50)))
        closed = sum(1 for d in drains if d.done())
        for d in drains:
            d.cancel()
        row("50 churners (each within --join-rate) against 450 reading members, 256-byte names",
            f"joins accepted {accepted}, refused {refused}; readers closed: {closed}; {turns.text()}",
            "--session-join-rate 500 / 10 s; nobody closed", BEFORE["churn"])
    finally:
        for c in readers + churners:
            await c.ws.close()
        relay.stop()


async def drain(c: Client) -> None:
    async for _ in c.ws:
        pass


def pile_up() -> None:
    relay = RelayProcess(["--heartbeat-interval", "0", "--heartbeat-timeout", "0", "--session-join-rate", "0"])
    members = []
    try:
        for i in range(3000):
            members.append(silent_member(relay.port, f"m{i}", f"p{i % 6}"))
        turns = Turns(relay)
        rss_before = rss_mb(relay)
        watch = storm.Watch(relay.port)
        rejoin(members, lambda i: f"p{i % 6}")
        wait_for_metric(relay, 'relay_commands_total{type="session.join"}', 6000, timeout=300)
        watched = storm.Watch.text(watch.stop())
        queued = metric(relay, "relay_outbound_queued_bytes") / 2**20
        kernel = metric(relay, "relay_kernel_send_buffer_bound_bytes") / 2**20
        row("3 000 non-readers of six 500-member sessions leave and re-join at once",
            f"{turns.text()}; RSS {rss_before:.0f} → {rss_mb(relay):.0f} MB, queued {queued:.0f} MiB "
            f"(shared frames counted once per queue), kernel send buffers ≤ {kernel:.0f} MiB; "
            f"reads deferred {metric(relay, 'relay_loop_deferred_reads_total'):.0f}; {watched}",
            "turns ≤ 50 ms; canary p99 ≤ 100 ms, nothing refused; /metrics, /readyz ≤ 100 ms", BEFORE["pile"])
    finally:
        for s in members:
            s.close()
        relay.stop()


def join_storm() -> None:
    ramp, failed, figures = storm.run(STORM_SESSIONS, STORM_MEMBERS)
    row(f"Join storm: {STORM_SESSIONS} sessions × {STORM_MEMBERS} members join as fast as allowed and read nothing; "
        "2 canaries in their own session send a message every 100 ms",
        f"ramp {ramp:.1f} s ({failed} failed); {figures}",
        "canary p99 ≤ 100 ms, nothing refused; /metrics, /readyz ≤ 100 ms", BEFORE["storm"])


def mass_death() -> None:
    relay = RelayProcess(["--heartbeat-interval", "0", "--heartbeat-timeout", "30000", "--session-join-rate", "0",
                          "--max-participants", "2000"])
    members = []
    try:
        for i in range(6000):
            members.append(silent_member(relay.port, f"d{i}", f"q{i % 4}"))
        turns = Turns(relay)
        last_word(members)
        lost = wait_for_metric(relay, "relay_participants_lost_total", 6000, timeout=120)
        row("6 000 members of four 1 500-member sessions stop at once (heartbeat timeout)",
            f"{lost:.0f} lost; {turns.text()}", "turns ≤ 50 ms", BEFORE["death"])
    finally:
        for s in members:
            s.close()
        relay.stop()


async def stall_canary() -> None:
    relay = RelayProcess(["--heartbeat-interval", "0"])
    try:
        c = await Client.connect(relay.ws)
        await c.hello_dev("canary")
        await c.send({"type": "session.join", "session": "q"})
        await c.recv_type("session.joined")
        sent = 0
        for phase in ("before", "stopped", "after"):
            if phase == "stopped":
                os.kill(relay.proc.pid, signal.SIGSTOP)
            for _ in range(30 if phase == "stopped" else 20):
                await c.send({"type": "message.send", "id": f"m{sent}", "session": "q", "data": sent})
                sent += 1
                await asyncio.sleep(0.1)
            if phase == "stopped":
                os.kill(relay.proc.pid, signal.SIGCONT)
        refused = got = 0
        while got < sent:
            m = await c.recv(timeout=10)
            if m.get("re", "").startswith("m"):
                got += 1
                refused += m["type"] == "error"
        row("Canary at 10 msg/s, relay stopped 3 s", f"{refused} of {sent} refused", "0", BEFORE["canary"])
    finally:
        relay.stop()


async def ringing() -> None:
    relay = RelayProcess(["--heartbeat-interval", "0"])
    try:
        target = await Client.connect(relay.ws)
        await target.hello_dev("target")
        outcomes = []

        async def call(i: int):
            c = await Client.connect(relay.ws)
            await c.hello_dev(f"caller{i}")
            for k in range(10):
                await c.send({"type": "call.initiate", "id": f"i{k}", "to": ["target"], "callType": "audio"})
                while True:
                    m = await c.recv(timeout=30)
                    if m.get("re") == f"i{k}":
                        break
                outcomes.append(m["type"] if m["type"] == "ok" else m["code"])
            await c.close()

        for batch in range(0, 200, 50):
            await asyncio.gather(*(call(i) for i in range(batch, batch + 50)))
        await target.send({"type": "ping", "id": "end"})
        incoming = 0
        while (m := await target.recv(timeout=30))["type"] != "pong":
            incoming += m["type"] == "call.incoming"
        row("200 callers ring one user, 10 calls each",
            f"target got {incoming} call.incoming; {outcomes.count('rate_limited')} of {len(outcomes)} refused",
            "--ring-rate 10 / 60 s", BEFORE["ring"])
    finally:
        relay.stop()


ATTACKS = {
    "slow_reader": slow_reader, "identities": lambda: asyncio.run(identities()), "churn": lambda: asyncio.run(churn()),
    "pile_up": pile_up, "join_storm": join_storm, "mass_death": mass_death,
    "stall_canary": lambda: asyncio.run(stall_canary()), "ringing": lambda: asyncio.run(ringing()),
}


def main() -> None:
    # `abuse.py ATTACK…` runs only those and prints their rows; no argument runs all
    # and writes the results file.
    if len(sys.argv) > 1:
        for name in sys.argv[1:]:
            ATTACKS[name]()
        for a, before, m, b in rows:
            print(f"| {a} | {before} | {m} | {b} |")
        return
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    slow_reader()
    asyncio.run(identities())
    asyncio.run(churn())
    pile_up()
    join_storm()
    mass_death()
    asyncio.run(stall_canary())
    asyncio.run(ringing())
    out = ROOT / "Benchmarks" / "results" / "abuse.md"
    lines = [
        "# Abuse figures",
        "",
        f"`make bench-abuse` ({started}, `{os.environ['RELAY_BIN']}`, loopback, {os.cpu_count()} cores shared"
        " with the load generator). Loop turns come from `relay_loop_turn_seconds` (busy time per turn),"
        " measured from the start of each attack to its end; RSS from /proc. Kernel send buffers are"
        " bounded per socket by `--socket-send-buffer-bytes` (65 536; Linux keeps twice that).",
        "",
        "| attack | before these bounds (earlier attack run) | measured | bound |",
        "|---|---|---|---|",
        *[f"| {a} | {before} | {m} | {b} |" for a, before, m, b in rows],
        "",
    ]
    # The sections after the table are written by hand (how a figure was found):
    # kept as they are.
    kept = out.read_text() if out.exists() else ""
    notes = kept[kept.index("\n## "):] if "\n## " in kept else ""
    out.write_text("\n".join(lines) + notes)
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
