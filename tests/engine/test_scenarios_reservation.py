"""Scenarios for EASY backfilling with reservations, and the preemption thrash guard.

Cluster used by most rows: n1 has 2 free GPUs and 6 busy until NOW + 3500; n2 is busy until
NOW + 90_000. A 4-GPU head cannot fit now and reserves n1 (it frees first).
"""

import dataclasses

import pytest

from scheduling.engine import schedule
from scheduling.engine.wording import wait
from tests.engine.builders import NOW, job, node, running, snap


def busy(node_name, gpus, ends_in, team="x", prefix=None):
    prefix = prefix or f"{node_name}-r"
    return [running(job(f"{prefix}{i}", team=team, expected_runtime_s=ends_in + 100), node_name,
                    [i], started=NOW - 100) for i in gpus]


BASE_NODES = ["n1", "n2"]
BASE_RUNS = busy("n1", range(6), 3500) + busy("n2", range(8), 90_000)
HEAD = job("head", gpus=4, queue_order=1)

SCENARIOS = [
    # name, nodes, running, pending, expected {job: node} binds
    ("a long job may not start on reserved GPUs",
     BASE_NODES, BASE_RUNS, [HEAD, job("long", queue_order=2, expected_runtime_s=90_000)], {}),
    ("a job ending before the reservation backfills onto reserved GPUs",
     BASE_NODES, BASE_RUNS, [HEAD, job("short", queue_order=2, expected_runtime_s=600)],
     {"short": "n1"}),
    ("a long job starts on capacity nobody reserved",
     BASE_NODES + ["n3"], BASE_RUNS + busy("n3", range(6), 90_000),
     [HEAD, job("long", queue_order=2, expected_runtime_s=90_000)], {"long": "n3"}),
    ("another team's long job respects the reservation too",
     BASE_NODES, BASE_RUNS, [HEAD, job("other", team="b", expected_runtime_s=90_000)], {}),
    ("a higher class is not bound by a training reservation",
     BASE_NODES, BASE_RUNS, [HEAD, job("inter", cls="interactive", expected_runtime_s=90_000)],
     {"inter": "n1"}),
]


@pytest.mark.parametrize("name, nodes, runs, pending, expected", SCENARIOS,
                         ids=[s[0] for s in SCENARIOS])
def test_reservations(name, nodes, runs, pending, expected):
    plan = schedule(snap([node(n) for n in nodes], pending, runs))
    assert {b.job_id: b.node for b in plan.binds} == expected
    head = plan.pending["head"]
    assert head.reason == "reserved"
    assert "holds a reservation on n1 (4 GPUs), free in ~58 min when their running jobs" in head.message
    assert head.eta == NOW + 3500


def test_the_long_job_is_told_the_free_gpus_are_reserved():
    plan = schedule(snap([node(n) for n in BASE_NODES], [HEAD, job("long", queue_order=2,
                                                                    expected_runtime_s=90_000)],
                         BASE_RUNS))
    assert "2 held for head, which starts in ~58 min" in plan.pending["long"].message


def test_a_job_behind_a_blocked_gang_of_its_team_starts():
    # The 16-GPU gang reserves n1 (free) and n2 (frees first); n3 is left for the team-mate.
    runs = busy("n2", range(8), 3600) + busy("n3", range(4), 90_000)
    gang = job("gang", gpus=8, gang_size=2, queue_order=1)
    mate = job("mate", gpus=2, queue_order=2, expected_runtime_s=90_000)
    plan = schedule(snap([node("n1"), node("n2"), node("n3")], [gang, mate], runs,
                         queues=[("ml", 24)]))
    assert {b.job_id: b.node for b in plan.binds} == {"mate": "n3"}
    assert plan.pending["gang"].reason == "reserved"
    assert "n1, n2 (16 GPUs)" in plan.pending["gang"].message


def test_the_holder_starts_on_its_reservation_once_free():
    runs = busy("n2", range(8), 90_000)
    plan = schedule(snap([node("n1"), node("n2")], [HEAD, job("long", expected_runtime_s=1e5)],
                         runs))
    assert {b.job_id for b in plan.binds} == {"head", "long"}




@pytest.mark.parametrize("name, cls, age, expected", [
    ("just restarted: safe from interactive", "interactive", 300, 0),
    ("restarted half an hour ago: still safe from interactive", "interactive", 1800, 0),
    ("ran a while: interactive preempts", "interactive", 7200, 1),
    ("just restarted: production preempts anyway", "production", 300, 1),
])
def test_min_runtime_before_preemption(name, cls, age, expected):
    victim = running(job("low", cls="best-effort"), "n1", [0], started=NOW - age)
    hi = job("hi", cls=cls, kind="inference" if cls == "production" else "training")
    plan = schedule(snap([node("n1", gpus=1)], [hi], [victim], queues=[("ml", 2)]))
    assert len(plan.preemptions) == expected
    assert plan.binds == ()


def test_the_demo_speaks_the_waits_people_wait():
    # The embedded demo's cluster does a minute of work a second: the reason beside a 1-minute
    # estimated start says ~1 min, not the ~58 min of the cluster's work (issue 16).
    base = snap([node(n) for n in BASE_NODES], [HEAD, job("long", queue_order=2, expected_runtime_s=90_000)],
                BASE_RUNS)
    demo = schedule(dataclasses.replace(base, clock_speed=60.0))
    assert "free in ~1 min when" in demo.pending["head"].message
    assert "2 held for head, which starts in ~1 min" in demo.pending["long"].message
    assert demo.pending["head"].eta == NOW + 3500  # the estimate stays in the cluster's time (apply.py converts)


@pytest.mark.parametrize("seconds, speed, words", [
    (7200, 1.0, "in ~2h00m"), (7200, 60.0, "in ~2 min"), (3500, 1.0, "in ~58 min"), (20, 1.0, "now"),
    (7 * 3600 + 300, 1.0, "in ~7h05m"), (7 * 3600 * 60, 60.0, "in ~7h00m"),
])
def test_one_wording_for_every_wait(seconds, speed, words):
    assert wait(seconds, speed) == words


def test_a_snapshot_refuses_a_clock_that_stands_still():
    with pytest.raises(ValueError, match="clock_speed"):
        dataclasses.replace(snap([node("n1")]), clock_speed=0)


def test_a_blocked_whole_gpu_job_reserves_no_gpu_of_a_sharing_node():
    # An MPS node offers replicas only, never a whole GPU (engine/sharing.py). Its idle GPUs were
    # the head's reservation, "free now", for a job that could never start there; the head held
    # that instead of the GPUs it can use, and the idle GPUs were counted as held for it (most of
    # the "reserved" idle GPU-hours of the simulator's sweep). It reserves n1; shares still go to m.
    mps = node("m", sharing="mps", replicas=4)
    share = job("share", gpus=0, mem=10.0, queue_order=2, expected_runtime_s=90_000)
    plan = schedule(snap([node(n) for n in BASE_NODES] + [mps], [HEAD, share], BASE_RUNS))
    assert {b.job_id: b.node for b in plan.binds} == {"share": "m"}
    assert plan.pending["head"].reason == "reserved"
    assert "holds a reservation on n1 (4 GPUs)" in plan.pending["head"].message
