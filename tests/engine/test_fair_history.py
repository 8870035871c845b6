"""Fair share over time (issue 18): decayed use per team orders lending and reclaim, never the
guarantee (engine/fair_history.py)."""

import math

import pytest

from scheduling.engine import Queue, schedule
from scheduling.engine.fair_history import (
    HALF_LIFE_S,
    decay,
    decayed_gpu_s,
    ratios,
    share_weights,
    usage_shares,
)
from scheduling.engine.snapshot_io import snapshot_from_dict, snapshot_to_dict
from scheduling.engine.types import UsageHistory
from tests.engine.builders import NOW, job, node, running, snap

H = HALF_LIFE_S
DAY = 86400.0


def history(**gpu_s):
    return UsageHistory(half_life_s=H, since=NOW - 30 * DAY, team_gpu_s=tuple(sorted(gpu_s.items())))


# --- the arithmetic ---------------------------------------------------------------------------

def test_use_weighs_half_after_one_half_life_and_a_quarter_after_two():
    assert decay(0, H) == 1.0
    assert decay(H, H) == pytest.approx(0.5)
    assert decay(2 * H, H) == pytest.approx(0.25)
    recent = decayed_gpu_s(8, NOW - DAY, NOW, NOW, H)
    assert decayed_gpu_s(8, NOW - H - DAY, NOW - H, NOW, H) == pytest.approx(recent / 2)
    # The same interval seen one half-life later weighs half as much.
    assert decayed_gpu_s(8, NOW - DAY, NOW, NOW + H, H) == pytest.approx(recent / 2)


def test_decayed_gpu_seconds_is_the_integral_and_ignores_the_future():
    # An hour ago, one GPU for a minute: ~60 GPU-seconds, barely decayed.
    assert decayed_gpu_s(1, NOW - 3600, NOW - 3540, NOW, H) == pytest.approx(60 * decay(3570, H), rel=1e-6)
    assert decayed_gpu_s(1, NOW + 10, NOW + 20, NOW, H) == 0.0
    # Use older than the window (ten half-lives) is left out.
    assert decayed_gpu_s(1, NOW - 11 * H, NOW - 10.5 * H, NOW, H) == 0.0


def test_a_half_life_of_zero_is_refused():
    with pytest.raises(ValueError, match="half_life_s"):
        UsageHistory(half_life_s=0.0, since=NOW, team_gpu_s=())


def test_use_is_normalised_by_cluster_capacity_over_the_same_decayed_window():
    since = NOW - 3 * H
    full = decayed_gpu_s(16, since, NOW, NOW, H)  # the whole 16-GPU cluster, all the time
    quarter = decayed_gpu_s(4, since, NOW, NOW, H)
    hist = UsageHistory(half_life_s=H, since=since, team_gpu_s=(("a", full), ("b", quarter)))
    assert usage_shares(hist, 16, NOW) == pytest.approx({"a": 1.0, "b": 0.25})


def test_the_ratio_is_use_over_the_guarantee_share():
    queues = [Queue(team="a", guaranteed_gpus=4, burst_limit_gpus=None, weight=1),
              Queue(team="b", guaranteed_gpus=12, burst_limit_gpus=None, weight=1),
              Queue(team="free", guaranteed_gpus=0, burst_limit_gpus=None, weight=1)]
    assert share_weights(queues) == {"a": 0.25, "b": 0.75, "free": 0.0}
    since = NOW - 3 * H
    hist = UsageHistory(half_life_s=H, since=since, team_gpu_s=(
        ("a", decayed_gpu_s(7.2, since, NOW, NOW, H)), ("free", 1.0)))
    got = ratios(hist, queues, 16, NOW)
    assert got["a"] == pytest.approx(1.8)  # 0.45 of the cluster against a 0.25 share
    assert got["b"] == 0.0
    assert got["free"] == math.inf  # no share: after every team that has one
    # Work running now adds its entry penalty (Kueue's admission fair sharing): b starts 6 GPUs.
    assert ratios(hist, queues, 16, NOW, entry={"b": 6})["b"] == pytest.approx(0.5)


def test_without_guarantees_the_share_follows_the_weights():
    queues = [Queue(team="a", guaranteed_gpus=0, burst_limit_gpus=None, weight=1),
              Queue(team="b", guaranteed_gpus=0, burst_limit_gpus=None, weight=3)]
    assert share_weights(queues) == {"a": 0.25, "b": 0.75}


# --- lending ----------------------------------------------------------------------------------

def _lending(hist):
    """8 GPUs; a and b each run their 2 guaranteed GPUs and each want 4 more: only one can borrow
    the 4 idle GPUs. Current load is equal, so only history can tell them apart."""
    busy = [running(job("a-run", team="a", gpus=2), "n1", [0, 1]),
            running(job("b-run", team="b", gpus=2), "n1", [2, 3])]
    pending = [job("a-big", team="a", gpus=4), job("b-big", team="b", gpus=4)]
    return schedule(snap([node("n1")], pending, busy, queues=[("a", 2), ("b", 2)], usage_history=hist))


def _borrowers(plan):
    return {b.team for b in plan.binds if b.borrowed}


def test_with_equal_history_the_tie_stays_as_before():
    assert _borrowers(_lending(None)) == {"a"}  # by name, as without fair history


@pytest.mark.parametrize("heavy, lender", [("a", "b"), ("b", "a")])
def test_idle_gpus_go_first_to_the_team_that_used_less_lately(heavy, lender):
    plan = _lending(history(**{heavy: 8 * 5 * DAY}))
    assert _borrowers(plan) == {lender}
    assert all(b.borrowed for b in plan.binds)


def test_old_use_has_decayed_and_counts_for_less_than_recent_use():
    # a used a lot 8 weeks ago (weighs 1/256), b a little yesterday: a borrows first.
    old = decayed_gpu_s(8, NOW - 60 * DAY, NOW - 56 * DAY, NOW, H)
    recent = decayed_gpu_s(1, NOW - DAY, NOW, NOW, H)
    assert old < recent
    assert _borrowers(_lending(history(a=old, b=recent))) == {"a"}


def test_the_policy_without_fair_history_ignores_it():
    from scheduling.engine.policies import get_policy
    busy = [running(job("a-run", team="a", gpus=2), "n1", [0, 1]),
            running(job("b-run", team="b", gpus=2), "n1", [2, 3])]
    pending = [job("a-big", team="a", gpus=4), job("b-big", team="b", gpus=4)]
    plain = get_policy("tessera").with_features(fair_history=False)
    plan = schedule(snap([node("n1")], pending, busy, queues=[("a", 2), ("b", 2)],
                         usage_history=history(a=8 * 5 * DAY)), plain)
    assert _borrowers(plan) == {"a"}


# --- the guarantee ----------------------------------------------------------------------------

def test_history_never_touches_a_guarantee():
    # a used the whole cluster for weeks; its job within its guarantee still goes first, and b's
    # burst (which would take every GPU) waits.
    pending = [job("b-burst", team="b", gpus=8, submitted_at=-10.0), job("a-own", team="a", gpus=2)]
    plan = schedule(snap([node("n1")], pending, queues=[("a", 2), ("b", 0)],
                         usage_history=history(a=8 * 30 * DAY)))
    assert {b.job_id for b in plan.binds} == {"a-own"}


def test_a_heavy_team_still_reclaims_its_guarantee():
    lent = [running(job(f"b{i}", team="b"), "n1", [i], borrowed=True) for i in range(8)]
    plan = schedule(snap([node("n1")], [job("a1", team="a", gpus=2)], lent, queues=[("a", 4), ("b", 0)],
                         usage_history=history(a=8 * 30 * DAY)))
    assert {p.reason for p in plan.preemptions} == {"reclaim"}


# --- reclaim ----------------------------------------------------------------------------------

def _reclaim(hist):
    """8 GPUs full: a and b each run 2 guaranteed and 2 borrowed; c wants 2 of its guarantee back."""
    busy = [running(job("a-own", team="a", gpus=2), "n1", [0, 1]),
            running(job("a-lent", team="a", gpus=2), "n1", [2, 3], borrowed=True),
            running(job("b-own", team="b", gpus=2), "n1", [4, 5]),
            running(job("b-lent", team="b", gpus=2), "n1", [6, 7], borrowed=True)]
    return schedule(snap([node("n1")], [job("c1", team="c", gpus=2)], busy,
                         queues=[("a", 2), ("b", 2), ("c", 4)], usage_history=hist))


@pytest.mark.parametrize("heavy, victim", [(None, "a-lent"), ("a", "a-lent"), ("b", "b-lent")])
def test_the_team_most_over_its_share_gives_back_first(heavy, victim):
    plan = _reclaim(history(**{heavy: 8 * 5 * DAY}) if heavy else None)
    assert [p.job_id for p in plan.preemptions] == [victim]
    assert plan.preemptions[0].reason == "reclaim"


def test_preferring_the_most_over_team_never_stops_more_than_the_plain_choice():
    """a (far over its share) lends a 16-GPU gang; b lends 2 GPUs. c reclaims 2: b's 2 come back,
    not a's whole gang. Seen in simulation: 64-GPU gangs stopped for 8-GPU guarantees (issue 18)."""
    big = job("a-big", team="a", gpus=8, gang_size=2)
    busy = [running(big, "n1", range(8), borrowed=True), running(big, "n2", range(8), borrowed=True, member=1),
            running(job("b-own", team="b", gpus=6), "n3", range(6)),
            running(job("b-lent", team="b", gpus=2), "n3", [6, 7], borrowed=True)]
    plan = schedule(snap([node("n1"), node("n2"), node("n3")], [job("c1", team="c", gpus=2)], busy,
                         queues=[("a", 2), ("b", 6), ("c", 16)], usage_history=history(a=24 * 5 * DAY)))
    assert [p.job_id for p in plan.preemptions] == ["b-lent"]


def test_preferring_the_most_over_team_never_loses_more_work_than_the_plain_choice():
    """Same GPUs either way, but a's borrowed job has run 10 h unsaved and b's 1 h: b's stops."""
    busy = [running(job("a-own", team="a", gpus=6), "n1", range(6)),
            running(job("a-lent", team="a", gpus=2), "n1", [6, 7], started=NOW - 36000, borrowed=True),
            running(job("b-own", team="b", gpus=6), "n2", range(6)),
            running(job("b-lent", team="b", gpus=2), "n2", [6, 7], borrowed=True)]
    plan = schedule(snap([node("n1"), node("n2")], [job("c1", team="c", gpus=2)], busy,
                         queues=[("a", 6), ("b", 6), ("c", 4)], usage_history=history(a=16 * 5 * DAY)))
    assert [p.job_id for p in plan.preemptions] == ["b-lent"]


# --- the snapshot carries it ------------------------------------------------------------------

def test_usage_history_round_trips_and_old_dumps_read_as_empty():
    snapshot = snap([node("n1")], usage_history=history(a=123.0, b=4.5))
    assert snapshot_from_dict(snapshot_to_dict(snapshot)) == snapshot
    document = snapshot_to_dict(snapshot)
    del document["snapshot"]["usage_history"]
    assert snapshot_from_dict(document).usage_history.team_gpu_s == ()
