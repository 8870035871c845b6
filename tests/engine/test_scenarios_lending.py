"""Work-conserving lending: GPUs that no job within its fair share can use are lent beyond the
share (still borrowed, still under the burst limit), instead of sitting idle."""

import pytest

from scheduling.engine import schedule
from tests.engine.builders import job, node, running, snap


def _plan(b_jobs, b_limit=None, c_busy=1, a_gpus=8, b_cls="training"):
    """One 8-GPU node; team c runs `c_busy` GPUs within its guarantee; team a waits for
    `a_gpus` GPUs on one node; team b has `b_jobs` one-GPU jobs. a and b have no guarantee."""
    busy = [running(job(f"c{i}", team="c"), "n1", [i]) for i in range(c_busy)]
    pending = [job("a1", team="a", gpus=a_gpus)] + \
        [job(f"b{i}", team="b", cls=b_cls) for i in range(b_jobs)]
    queues = [("a", 0), ("b", 0, b_limit), ("c", c_busy)]
    return schedule(snap([node("n1")], pending, busy, queues=queues))


@pytest.mark.parametrize("b_jobs, b_limit, a_gpus, placed_b, why_left", [
    # a's 8-GPU job cannot fit next to c: b borrows all 7 idle GPUs, not only its share 3.5.
    (8, None, 8, 7, "no-free-gpus"),
    # The burst limit stays a hard cap.
    (8, 5, 8, 5, "burst-limit"),
    # a's job fits: it takes its share first; b is lent only what a leaves idle.
    (8, None, 4, 3, "no-free-gpus"),
    # Fewer b jobs than idle GPUs: all start.
    (3, None, 8, 3, None),
])
def test_idle_gpus_are_lent_beyond_fair_share(b_jobs, b_limit, a_gpus, placed_b, why_left):
    plan = _plan(b_jobs, b_limit, a_gpus=a_gpus)
    b_binds = [b for b in plan.binds if b.team == "b"]
    assert len(b_binds) == placed_b
    assert all(b.borrowed for b in b_binds)
    left = [info.reason for job_id, info in plan.pending.items() if job_id.startswith("b")]
    assert set(left) == ({why_left} if why_left else set())


def test_lending_never_preempts_and_a_guarantee_still_reclaims():
    lent = [running(job(f"b{i}", team="b"), "n1", [i], borrowed=True) for i in range(8)]
    plan = schedule(snap([node("n1")], [job("a1", team="a", gpus=2)], lent,
                         queues=[("a", 4), ("b", 0)]))
    assert {p.reason for p in plan.preemptions} == {"reclaim"}
    assert plan.pending["a1"].reason == "waiting-for-preemption"


def test_a_team_under_its_share_still_goes_first():
    pending = [job(f"a{i}", team="a") for i in range(4)] + [job(f"b{i}", team="b") for i in range(8)]
    plan = schedule(snap([node("n1")], pending, queues=[("a", 0), ("b", 0)]))
    per_team = {t: sum(1 for b in plan.binds if b.team == t) for t in "ab"}
    assert per_team == {"a": 4, "b": 4}
