"""Cluster snapshots at a busy state (docs/cluster.md, "Bounded history"): with tens of
megabytes of replay, taking a snapshot does not hold a node's loop (the skeleton on
the loop, the bytes joined and digested on the thread pool), every due snapshot is
stored (in chunks, swapped in by one script), and the log is trimmed behind it."""
from __future__ import annotations

import re
import urllib.request

from cluster import cluster  # noqa: F401  (fixture)
from scale_load import fill, join_all
from test_cluster import FLAGS
from test_cluster_ops import keys, used_memory, xlen

SESSIONS = 40
SIZE = 4_000
# Each session's replay holds up to 1 MiB (the default): the first fill brings the
# replay to about 40 MB, the second keeps it there while the cluster snapshots it
# every SNAPSHOT_RECORDS records. Messages of 4 KB: the bytes of a big replay with
# few entries (the loop's share of a snapshot grows with entries, not bytes).
SNAPSHOT_RECORDS = 300
SCALE_FLAGS = [*FLAGS, "--message-rate", "1000000",
               "--replay-budget-bytes", str(64 << 20),
               "--snapshot-records", str(SNAPSHOT_RECORDS)]
# A turn this long is a stall every client of the node feels. Debug build on a shared
# machine: the skeleton of this state takes a few ms; joining and digesting 40 MB on
# the loop (what a snapshot did before) takes far longer.
TURN_BOUND_S = 0.1


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
    first = await fill(senders, 300, SIZE)
    assert first.ok == SESSIONS * 300, first.errors
    replay = n1.metric("relay_replay_bytes")
    assert replay > 30e6, f"the replay holds {replay / 1e6:.1f} MB: too small to test anything"
    stored0 = sum(n.metric("relay_cluster_snapshots_stored_total") for n in (n1, n2))
    stalls0 = [turns_over(n, TURN_BOUND_S) for n in (n1, n2)]

    second = await fill(senders, 150, SIZE)
    assert second.ok == SESSIONS * 150, second.errors
    position = n1.metric("relay_cluster_log_position")

    stored = sum(n.metric("relay_cluster_snapshots_stored_total") for n in (n1, n2)) - stored0
    print(f"replay {replay / 1e6:.1f} MB; snapshot {metric(n1, 'relay_cluster_snapshot_bytes') / 1e6:.1f} MB; "
          f"position {position:.0f}; stored {stored:.0f} during the second fill; "
          f"capture {max(metric(n, 'relay_cluster_snapshot_capture_seconds') for n in (n1, n2)) * 1e3:.1f} ms; "
          f"join+digest {max(metric(n, 'relay_cluster_snapshot_seconds') for n in (n1, n2)) * 1e3:.1f} ms; "
          f"longest turn {max(metric(n, 'relay_loop_turn_max_microseconds') for n in (n1, n2)) / 1e3:.1f} ms; "
          f"xlen {xlen(cluster)}; redis {used_memory(cluster) / 1e6:.1f} MB; p99 {second.quantile(0.99) * 1e3:.0f} ms")
    # Snapshots were taken and stored at the full state, none abandoned.
    assert stored >= 3
    assert sum(metric(n, "relay_cluster_snapshot_store_failures_total") for n in (n1, n2)) == 0
    # No loop turn of either node stalled while they snapshotted the full state.
    stalls = [turns_over(n, TURN_BOUND_S) - s for n, s in zip((n1, n2), stalls0)]
    assert stalls == [0, 0], f"loop turns over {TURN_BOUND_S * 1e3:.0f} ms during the second fill: {stalls}"
    # The log is trimmed behind the stored snapshots; Redis holds the state, not history.
    assert xlen(cluster) <= 3 * SNAPSHOT_RECORDS + 200, xlen(cluster)
    k = keys(cluster)
    assert cluster.redis.pipeline([[b"HEXISTS", k["snapshot"].encode(), b"bytes"]])[0] == b":0"
    snapshot_bytes = n1.metric("relay_cluster_snapshot_bytes") or n2.metric("relay_cluster_snapshot_bytes")
    assert used_memory(cluster) < 3 * snapshot_bytes + (32 << 20), used_memory(cluster)
