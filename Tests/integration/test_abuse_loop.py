"""The loop never stalls (protocol/PROTOCOL.md §16, `relay_loop_turn_seconds`): mass
heartbeat deaths are spread over turns (the core fires a bounded count of deadlines,
and of the recipients of the events they cause, per tick). Measured through the
relay's own histogram of turn times, not by timing anything from outside."""
from __future__ import annotations

from abuse_util import last_word, metric, silent_member, turns_longer_than, wait_for_metric

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
