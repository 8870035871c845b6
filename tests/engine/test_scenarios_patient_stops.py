"""Waiting rather than stopping much unsaved work (issue 18, evict.py `_waits_instead`): a job
not production that has waited less than `patient_stop_s` stops no set of victims losing more
than `patient_max_lost_s` GPU-seconds; once its wait is spent, or for production, or under a
baseline, the stop happens as before."""

import pytest

from scheduling.engine import schedule
from scheduling.engine.policies import TESSERA
from tests.engine.builders import NOW, inference, job, node, running, snap

WAIT = TESSERA.features.patient_stop_s
MOST = TESSERA.features.patient_max_lost_s


def _lent(name, gpus, hours, **kw):
    """Team b's job borrowing GPUs 0.. of n1, running `hours` without a checkpoint unless told."""
    return running(job(name, team="b", gpus=gpus, **kw), "n1", range(gpus), started=NOW - hours * 3600,
                   borrowed=True)


def _reclaim(waited, lent, policy="tessera"):
    """Team a (guarantee 8) waits `waited` s for 8 GPUs of the one 8-GPU node team b borrows."""
    pending = [job("a1", team="a", gpus=8, submitted_at=NOW - waited)]
    return schedule(snap([node("n1")], pending, lent, queues=[("a", 8), ("b", 0)]), policy)


def test_tessera_waits_rather_than_stop_much_unsaved_work():
    assert WAIT == 3600 and MOST == 16 * 3600
    lent = [_lent("b-old", 8, 6)]  # 48 GPU-h since it started, no checkpoint
    plan = _reclaim(60, lent)
    assert not plan.preemptions
    assert plan.pending["a1"].reason != "waiting-for-preemption"
    # Once the wait is spent, the guarantee comes back as before.
    plan = _reclaim(WAIT + 1, lent)
    assert [(p.job_id, p.reason) for p in plan.preemptions] == [("b-old", "reclaim")]


@pytest.mark.parametrize("lent", [
    [_lent("b-young", 8, 1.5)],  # 12 GPU-h lost: under the bound
    [_lent("b-saved", 8, 6, checkpoint_interval_s=1800.0, last_checkpoint_at=NOW - 600)],  # 1.3 GPU-h
])
def test_a_cheap_stop_happens_at_once(lent):
    plan = _reclaim(60, lent)
    assert [p.job_id for p in plan.preemptions] == [lent[0].job.id]


@pytest.mark.parametrize("policy", ["volcano", "kueue"])
def test_baselines_do_not_wait(policy):
    plan = _reclaim(60, [_lent("b-old", 8, 6)], policy)
    assert [p.job_id for p in plan.preemptions] == ["b-old"]


def test_production_never_waits():
    busy = [running(job("t1", team="web", gpus=8), "n1", range(8), started=NOW - 6 * 3600)]
    plan = schedule(snap([node("n1")], [inference("p1", 20.0, submitted_at=NOW - 5)], busy,
                         queues=[("web", 8)]))
    assert [p.job_id for p in plan.preemptions] == ["t1"]
