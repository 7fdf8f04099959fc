"""The loop never stalls (protocol/PROTOCOL.md §16, `relay_loop_turn_seconds`): mass
heartbeat deaths are spread over turns (the core fires a bounded count of deadlines,
and of the recipients of the events they cause, per tick). Measured through the
relay's own histogram of turn times, not by timing anything from outside."""
from __future__ import annotations

from abuse_util import last_word, metric, rejoin, silent_member, turns_longer_than, wait_for_metric

SESSIONS = 4
PER_SESSION = 1000


def test_mass_heartbeat_death_is_spread_over_turns(relay_factory):
    relay = relay_factory("--heartbeat-interval", "0", "--heartbeat-timeout", "20000", "--grace", "60000",
                          "--session-join-rate", "0")
    members = []
    try:
        for s in range(SESSIONS):
            for i in range(PER_SESSION):
                members.append(silent_member(relay.port, f"u{s}-{i}", f"s{s}"))
        assert metric(relay, "relay_participants") == SESSIONS * PER_SESSION
        before = turns_longer_than(relay, "0.25")
        last_word(members)
        # Every member falls silent at once: all are lost within one heartbeat quantum.
        lost = wait_for_metric(relay, "relay_participants_lost_total", SESSIONS * PER_SESSION, timeout=60)
        assert lost == SESSIONS * PER_SESSION
        # The bound is 50 ms for a release build with a core of its own; this is a
        # debug build sharing its cores, so the test holds it to 250 ms (before the
        # tick bound: turns of more than 1 s here).
        stalls = turns_longer_than(relay, "0.25") - before
        assert stalls == 0, f"{stalls} loop turns over 250 ms during the mass death"
    finally:
        for s in members:
            s.close()


def test_rejoin_pile_up_is_spread_over_turns(relay_factory):
    """A thousand non-readers of two 500-member sessions leave and re-join at once:
    every re-join is a snapshot of 500 members and two events to every member. The
    reads are spread over turns (`turnReadBudgetMs`), so timers and /metrics keep
    their turns. Before: one turn of 1.6 s here (every ready socket's read handled
    in the poll phase that returned it)."""
    relay = relay_factory("--heartbeat-interval", "0", "--heartbeat-timeout", "0", "--session-join-rate", "0")
    members = []
    try:
        for i in range(1000):
            members.append(silent_member(relay.port, f"m{i}", f"p{i % 2}"))
        before = turns_longer_than(relay, "0.25")
        rejoin(members, lambda i: f"p{i % 2}")
        joins = wait_for_metric(relay, "relay_commands_total{type=\"session.join\"}", 2000, timeout=120)
        assert joins == 2000
        stalls = turns_longer_than(relay, "0.25") - before
        assert stalls == 0, f"{stalls} loop turns over 250 ms during the pile-up"
        assert metric(relay, "relay_loop_deferred_reads_total") > 0
    finally:
        for s in members:
            s.close()
