"""Cluster snapshots at a busy state (docs/cluster.md, "Bounded history"): with tens of
megabytes of replay, taking a snapshot does not hold a node's loop (the skeleton on
the loop, the bytes joined and digested on the thread pool), every due snapshot is
stored (in chunks, swapped in by one script), and the log is trimmed behind it."""
from __future__ import annotations

import asyncio
import re
import time
import urllib.request

from cluster import cluster  # noqa: F401  (fixture)
from scale_load import fill, join_all
from test_cluster import FLAGS
from test_cluster_ops import keys, used_memory, xlen

SESSIONS = 40
SIZE = 4_000
# Each session's replay holds up to 1 MiB (the default): the fill brings the replay to
# about 40 MB, in messages of 4 KB (the loop's share of a snapshot grows with entries,
# not bytes; the bytes are what used to stall it). Then one client sends small
# messages one at a time into a session of its own, so the log moves on while the
# machine is quiet: the cluster snapshots the full state every SNAPSHOT_RECORDS
# records, and a long loop turn is the snapshot's, not the load's.
SNAPSHOT_RECORDS = 150
PROBES = 900
SCALE_FLAGS = [*FLAGS, "--message-rate", "1000000", "--replay-budget-bytes", str(64 << 20),
               "--snapshot-records", str(SNAPSHOT_RECORDS)]
# The contract's bound for a snapshot's share of a loop turn is 50 ms in a release
# build, which Benchmarks/cluster.py (scale rows) measures. This test runs the debug
# build on a shared machine, where the skeleton of this state alone comes near that
# bound; it asserts a bound that a snapshot joined, digested and sent on the loop
# (as before) exceeds at this state, and that the debug skeleton stays within.
TURN_BOUND_S = 0.25


def metric(node, name: str) -> float:
    """A series of /metrics, 0 when this binary has none by that name."""
    try:
        return node.metric(name)
    except KeyError:
        return 0.0


def turns_over(node, bound_s: float) -> int:
    """Loop turns longer than `bound_s` so far (from the `relay_loop_turn_seconds` histogram)."""
    with urllib.request.urlopen(node.http + "/metrics", timeout=10) as r:
        text = r.read().decode()
    total = below = None
    for line in text.splitlines():
        if line.startswith("relay_loop_turn_seconds_count"):
            total = float(line.split()[1])
        m = re.match(r'relay_loop_turn_seconds_bucket\{le="([0-9.e+-]+)"\} (\S+)', line)
        if m and abs(float(m.group(1)) - bound_s) < 1e-9:
            below = float(m.group(2))
    assert total is not None and below is not None, "no loop-turn histogram bucket at the bound"
    return int(total - below)


async def test_snapshots_of_a_big_replay_hold_no_loop_and_are_all_stored(cluster):
    n1 = cluster.node(*SCALE_FLAGS)
    n2 = cluster.node(*SCALE_FLAGS)
    senders = await join_all([n1.ws, n2.ws], SESSIONS)
    filled = await fill(senders, 300, SIZE)
    assert filled.ok == SESSIONS * 300, filled.errors
    replay = n1.metric("relay_replay_bytes")
    assert replay > 30e6, f"the replay holds {replay / 1e6:.1f} MB: too small to test anything"

    stored0 = sum(n.metric("relay_cluster_snapshots_stored_total") for n in (n1, n2))
    superseded0 = [metric(n, "relay_cluster_snapshots_superseded_total") for n in (n1, n2)]
    stalls0 = [turns_over(n, TURN_BOUND_S) for n in (n1, n2)]
    start = n1.metric("relay_cluster_log_position")
    probe = await join_all([n1.ws], 1, prefix="probe")
    probed = await fill(probe, PROBES, 100, window=1)
    assert probed.ok == PROBES, probed.errors
    moved = n1.metric("relay_cluster_log_position") - start
    due = int(moved // SNAPSHOT_RECORDS)
    # Only the ticker stores; a node whose join is still running when two more fall
    # due drops the older waiting one (superseded, counted) and stores the newest. The
    # last ones may still be uploading when the probes end: wait for them (the relay
    # offers no event for a stored snapshot; /metrics is polled, bounded).

    def accounted() -> tuple[float, float]:
        stored = sum(n.metric("relay_cluster_snapshots_stored_total") for n in (n1, n2)) - stored0
        superseded = max(metric(n, "relay_cluster_snapshots_superseded_total") - s
                         for n, s in zip((n1, n2), superseded0))
        return stored, superseded

    # The trim behind them comes with the store after the newest: wait for it too.
    deadline = time.monotonic() + 30
    stored, superseded = accounted()
    while (stored + superseded < due or xlen(cluster) > 3 * SNAPSHOT_RECORDS) and time.monotonic() < deadline:
        await asyncio.sleep(0.2)
        stored, superseded = accounted()
    stalls = [turns_over(n, TURN_BOUND_S) - s for n, s in zip((n1, n2), stalls0)]
    print(f"replay {replay / 1e6:.1f} MB; snapshot {metric(n1, 'relay_cluster_snapshot_bytes') / 1e6:.1f} MB; "
          f"{moved:.0f} records, {due} snapshots due, {stored:.0f} stored, {superseded:.0f} superseded; "
          f"capture {max(metric(n, 'relay_cluster_snapshot_capture_seconds') for n in (n1, n2)) * 1e3:.1f} ms; "
          f"join+digest {max(metric(n, 'relay_cluster_snapshot_seconds') for n in (n1, n2)) * 1e3:.1f} ms; "
          f"turns over {TURN_BOUND_S * 1e3:.0f} ms {stalls}; xlen {xlen(cluster)}; "
          f"redis {used_memory(cluster) / 1e6:.1f} MB; probe p99 {probed.quantile(0.99) * 1e3:.0f} ms")
    # Every due snapshot of the full state was stored, or superseded by a newer one
    # that was.
    assert due >= 3 and stored >= 2 and stored + superseded >= due, (due, stored, superseded)
    assert sum(metric(n, "relay_cluster_snapshot_store_failures_total") for n in (n1, n2)) == 0
    # Every replica captures: the loop thread's CPU time for it is reported, and a
    # single thread's CPU time never exceeds the wall time it spanned.
    for n in (n1, n2):
        cpu, wall = n.metric("relay_cluster_snapshot_capture_cpu_max_seconds"), \
            n.metric("relay_cluster_snapshot_capture_max_seconds")
        assert 0 < cpu <= wall + 1e-3, (cpu, wall)
    # No loop turn of either node stalled while they snapshotted the full state.
    assert stalls == [0, 0], f"loop turns over {TURN_BOUND_S * 1e3:.0f} ms while snapshotting: {stalls}"
    # The log is trimmed behind the stored snapshots (untrimmed it would hold the fill's
    # 12 000 records and more); Redis holds the state, not history.
    assert xlen(cluster) <= 3 * SNAPSHOT_RECORDS, xlen(cluster)
    k = keys(cluster)
    assert cluster.redis.pipeline([[b"HEXISTS", k["snapshot"].encode(), b"bytes"]])[0] == b":0"
    assert used_memory(cluster) < 3 * replay + (32 << 20), used_memory(cluster)
